"""Prepare a Temporal cluster for kernelopt: namespace, retention, search attributes.

The embedded dev server does this itself at start (``kernelopt.temporal_server``);
a production cluster is prepared once by this script, run as a one-shot job
(docker compose service ``temporal-setup``, Kubernetes Job ``kernelopt-setup``)
from the worker image, with the same ``KERNELOPT_*`` settings the workers use.

It is idempotent: an existing namespace gets its retention raised to the
configured value (never lowered), existing search attributes are kept, and an
attribute registered with another type is an error (renaming is a human's call:
campaign queries depend on it).  The list of attributes is imported from
``kernelopt.temporal_server.SEARCH_ATTRIBUTES``, so the cluster and the
workflows cannot drift apart.

``--check`` only verifies (exit 1 and a list of what is missing): use it on
Temporal Cloud, where namespaces and search attributes are created with
``tcld`` or the web UI rather than through the cluster's operator API.

Usage::

    python deploy/setup_temporal.py [--check] [--wait-s 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.namespace.v1 import NamespaceConfig
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import (
    DescribeNamespaceRequest,
    RegisterNamespaceRequest,
    UpdateNamespaceRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from kernelopt.config import Settings
from kernelopt.errors import InfrastructureError
from kernelopt.log import configure, get_logger
from kernelopt.temporal_server import SEARCH_ATTRIBUTES

log = get_logger("kernelopt.deploy.setup")

_TYPES: dict[str, int] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}


class SetupError(Exception):
    """The cluster is not (and could not be made) ready for kernelopt."""


async def _connect(settings: Settings, wait_s: float) -> Client:
    """Connect, waiting for a cluster that is still starting (compose/k8s start order)."""
    from kernelopt.client import connect

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await connect(settings, start_embedded=False)
        except InfrastructureError as exc:
            if time.monotonic() > deadline:
                raise SetupError(str(exc)) from exc
            log.info("waiting for the Temporal frontend", address=settings.address)
            await asyncio.sleep(3)


async def _retention(client: Client, namespace: str) -> timedelta | None:
    """The namespace's retention, or None when the namespace does not exist."""
    try:
        resp = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return resp.config.workflow_execution_retention_ttl.ToTimedelta()


async def ensure_namespace(client: Client, namespace: str, retention: timedelta) -> str:
    """Create the namespace or raise its retention; returns what was done."""
    current = await _retention(client, namespace)
    if current is None:
        req = RegisterNamespaceRequest(
            namespace=namespace,
            description="kernelopt campaigns (audit trail: keep long)",
        )
        req.workflow_execution_retention_period.FromTimedelta(retention)
        try:
            await client.workflow_service.register_namespace(req)
        except RPCError as exc:
            if exc.status != RPCStatusCode.ALREADY_EXISTS:  # a concurrent job won the race
                raise
        return "created"
    if current >= retention:
        return "kept"
    config = NamespaceConfig()
    config.workflow_execution_retention_ttl.FromTimedelta(retention)
    await client.workflow_service.update_namespace(
        UpdateNamespaceRequest(namespace=namespace, config=config)
    )
    return "retention raised"


async def _custom_attributes(client: Client, namespace: str) -> dict[str, int]:
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(resp.custom_attributes)


def _type_name(value: int) -> str:
    return next((name for name, v in _TYPES.items() if v == value), str(value))


async def ensure_search_attributes(
    client: Client, namespace: str, wanted: dict[str, str], wait_s: float = 60.0
) -> list[str]:
    """Register the missing attributes; returns their names.  Waits for a new namespace."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            existing = await _custom_attributes(client, namespace)
            break
        except RPCError as exc:
            # a namespace registered a moment ago is not in every frontend's cache yet
            if exc.status != RPCStatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)
    wrong = {
        name: _type_name(existing[name])
        for name, kind in wanted.items()
        if name in existing and existing[name] != _TYPES[kind]
    }
    if wrong:
        raise SetupError(
            "search attributes exist with another type: "
            + ", ".join(f"{n} is {t}, kernelopt needs {wanted[n]}" for n, t in wrong.items())
        )
    missing = {name: _TYPES[kind] for name, kind in wanted.items() if name not in existing}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)


async def check(client: Client, settings: Settings) -> list[str]:
    """What is missing or wrong for kernelopt in this namespace (empty: ready)."""
    want = timedelta(days=settings.retention_days)
    problems: list[str] = []
    current = await _retention(client, settings.namespace)
    if current is None:
        return [f"namespace {settings.namespace!r} does not exist"]
    if current < want:
        problems.append(
            f"retention is {current.days} days, kernelopt wants {settings.retention_days}"
        )
    existing = await _custom_attributes(client, settings.namespace)
    for name, kind in SEARCH_ATTRIBUTES.items():
        if name not in existing:
            problems.append(f"search attribute {name} ({kind}) is missing")
        elif existing[name] != _TYPES[kind]:
            problems.append(
                f"search attribute {name} is {_type_name(existing[name])}, needs {kind}"
            )
    return problems


async def setup(settings: Settings, *, check_only: bool = False, wait_s: float = 300.0) -> int:
    if settings.embedded:
        raise SetupError(
            "KERNELOPT_TEMPORAL_ADDRESS is not set: the embedded server prepares itself; "
            "this script is for a cluster"
        )
    client = await _connect(settings, wait_s)
    if not check_only:
        done = await ensure_namespace(
            client, settings.namespace, timedelta(days=settings.retention_days)
        )
        log.info(
            "namespace ready",
            namespace=settings.namespace,
            retention_days=settings.retention_days,
            action=done,
        )
        added = await ensure_search_attributes(client, settings.namespace, SEARCH_ATTRIBUTES)
        log.info("search attributes ready", added=added or "none")
    problems = await check(client, settings)
    for problem in problems:
        log.error("cluster not ready", problem=problem)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify only (Temporal Cloud)")
    parser.add_argument("--wait-s", type=float, default=300.0, help="wait for the frontend")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    configure(json=settings.log_json, level=settings.log_level)
    try:
        return asyncio.run(setup(settings, check_only=args.check, wait_s=args.wait_s))
    except (SetupError, RPCError) as exc:
        log.error("setup failed", error=str(exc))
        sys.stderr.write(f"setup_temporal: {exc}\n")
        return 2


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: the Temporal core runtime's threads can abort
    # a finalising interpreter (PyGILState_Release), turning success into SIGABRT.
    os._exit(code)
