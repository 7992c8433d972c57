"""deploy/setup_temporal.py against a real Temporal server (the session's dev server).

The production set-up job must create the namespace with kernelopt's retention
and register every search attribute the workflows upsert -- idempotently, so a
re-run of the job (every ``docker compose up``, every Helm/kubectl apply) is safe.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import (
    DescribeNamespaceRequest,
    RegisterNamespaceRequest,
)
from temporalio.client import Client

from kernelopt.config import Settings
from kernelopt.pyfile import exec_file_once
from kernelopt.temporal_server import SEARCH_ATTRIBUTES
from tests.support.paths import ROOT
from tests.support.temporal import env_for

SCRIPT = ROOT / "deploy" / "setup_temporal.py"
TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
}


def run_setup(settings: Settings, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_for(settings) | {
        "KERNELOPT_TEMPORAL_ADDRESS": settings.address,
        "KERNELOPT_NAMESPACE": namespace,
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--wait-s", "20"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(ROOT),
    )


async def retention(client: Client, namespace: str) -> timedelta:
    resp = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=namespace)
    )
    return resp.config.workflow_execution_retention_ttl.ToTimedelta()


async def custom_attributes(client: Client, namespace: str) -> dict[str, int]:
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(resp.custom_attributes)


async def test_setup_creates_namespace_retention_and_search_attributes(
    temporal_settings: Settings, client: Client
) -> None:
    namespace = f"deploy-{uuid.uuid4().hex[:8]}"
    before = run_setup(temporal_settings, namespace, "--check")
    assert before.returncode == 1, before.stderr
    assert "does not exist" in before.stderr

    first = run_setup(temporal_settings, namespace)
    assert first.returncode == 0, first.stderr
    assert await retention(client, namespace) == timedelta(days=365)
    attrs = await custom_attributes(client, namespace)
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert attrs.get(name) == TYPES[kind], f"{name} not registered as {kind}"

    again = run_setup(temporal_settings, namespace)  # every `compose up` re-runs the job
    assert again.returncode == 0, again.stderr
    assert "action=kept" in again.stderr and "added=none" in again.stderr
    assert run_setup(temporal_settings, namespace, "--check").returncode == 0


async def test_setup_raises_short_retention_and_refuses_a_mistyped_attribute(
    temporal_settings: Settings, client: Client
) -> None:
    namespace = f"deploy-{uuid.uuid4().hex[:8]}"
    req = RegisterNamespaceRequest(namespace=namespace)
    req.workflow_execution_retention_period.FromTimedelta(timedelta(days=1))
    await client.workflow_service.register_namespace(req)
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={"KernelOptPhase": IndexedValueType.INDEXED_VALUE_TYPE_TEXT},
        )
    )
    done = run_setup(temporal_settings, namespace)
    assert done.returncode == 2, done.stderr
    assert "KernelOptPhase is Text, kernelopt needs Keyword" in done.stderr
    assert await retention(client, namespace) == timedelta(days=365)


def test_setup_refuses_without_a_cluster_address(temporal_settings: Settings) -> None:
    env = env_for(temporal_settings)
    env.pop("KERNELOPT_TEMPORAL_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "KERNELOPT_TEMPORAL_ADDRESS is not set" in done.stderr


@pytest.mark.parametrize("kind", sorted(set(SEARCH_ATTRIBUTES.values())))
def test_every_search_attribute_type_is_known_to_the_script(kind: str) -> None:
    setup_temporal = exec_file_once(SCRIPT, "setup_temporal")
    assert kind in setup_temporal._TYPES
