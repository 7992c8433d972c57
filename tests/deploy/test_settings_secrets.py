"""Issue 8.2: workers take every connection setting from the environment or flags,
and secrets (the Temporal API key, the LLM key) never reach logs or history."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import types
import typing
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.client import Client

import worker
from kernelopt.config import Settings
from kernelopt.contracts import CampaignOptions, ProposerConfig
from tests.deploy.procs import ROOT, python_env, spawn
from tests.support.temporal import env_for

API_KEY = "tk-" + "9f2c" * 8  # distinctive: any occurrence in output is a leak
LLM_KEY = "sk-" + "77ab" * 8
DOCS = [ROOT / "README.md", ROOT / "deploy" / "README.md"]


def documented_variables() -> set[str]:
    """Every KERNELOPT_* variable named in the README and the deploy guide."""
    names: set[str] = set()
    for doc in DOCS:
        if doc.exists():
            names |= {m.rstrip("_") for m in re.findall(r"KERNELOPT_[A-Z0-9_]+", doc.read_text())}
    return names


def _raw_value(
    name: str, annotation: object, tmp: Path, default: object = None, metadata: list | None = None
) -> str:
    """A valid, non-default raw environment value for a Settings field (inside its bounds)."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    kinds = set(args) or {annotation}
    if SecretStr in kinds:
        return API_KEY
    if Path in kinds:
        return str(tmp / name)
    if bool in kinds:
        return "false" if default is True else "true"
    if int in kinds:
        upper = min((m.le for m in metadata or [] if hasattr(m, "le")), default=None)
        return "4242" if upper is None else str(upper)
    if float in kinds:
        return "0.25"
    return f"value-of-{name}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith("KERNELOPT_") or key == "OPENAI_BASE_URL":
            monkeypatch.delenv(key)
    return monkeypatch


def test_the_docs_name_the_connection_settings() -> None:
    documented = documented_variables()
    for name in (
        "KERNELOPT_TEMPORAL_ADDRESS",
        "KERNELOPT_NAMESPACE",
        "KERNELOPT_TLS",
        "KERNELOPT_TLS_CERT",
        "KERNELOPT_TLS_KEY",
        "KERNELOPT_TLS_CA",
        "KERNELOPT_API_KEY",
        "KERNELOPT_HOME",
    ):
        assert name in documented


def test_settings_from_env_reads_every_documented_variable(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    defaults = Settings()
    expected: dict[str, object] = {}
    for var in sorted(documented_variables()):
        field = var.removeprefix("KERNELOPT_").lower()
        assert field in Settings.model_fields, f"{var} is documented but Settings has no {field}"
        info = Settings.model_fields[field]
        raw = _raw_value(field, info.annotation, tmp_path, info.default, info.metadata)
        clean_env.setenv(var, raw)
        expected[field] = getattr(Settings.model_validate({field: raw}), field)
    settings = Settings.from_env()
    for field, value in expected.items():
        got = getattr(settings, field)
        if isinstance(value, SecretStr):
            assert isinstance(got, SecretStr) and got.get_secret_value() == value.get_secret_value()
        else:
            assert got == value, f"KERNELOPT_{field.upper()} was not read"
            assert got != getattr(defaults, field), f"test value for {field} equals its default"


def test_openai_base_url_is_the_fallback_endpoint(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_BASE_URL", "http://fallback:8000/v1")
    assert Settings.from_env().llm_base_url == "http://fallback:8000/v1"
    clean_env.setenv("KERNELOPT_LLM_BASE_URL", "http://primary:8000/v1")
    assert Settings.from_env().llm_base_url == "http://primary:8000/v1"


def test_worker_flags_override_the_environment(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("KERNELOPT_TEMPORAL_ADDRESS", "from-env:7233")
    clean_env.setenv("KERNELOPT_NAMESPACE", "env-ns")
    parser = argparse.ArgumentParser()
    worker.add_arguments(parser)
    args = parser.parse_args(
        [
            "--queue",
            "gpu",
            "--address",
            "from-flag:7233",
            "--namespace",
            "flag-ns",
            "--tls",
            "--tls-cert",
            str(tmp_path / "c.pem"),
            "--tls-key",
            str(tmp_path / "k.pem"),
            "--tls-ca",
            str(tmp_path / "ca.pem"),
        ]
    )
    settings = worker.settings_from_args(args)
    assert settings.address == "from-flag:7233"
    assert settings.namespace == "flag-ns"
    assert settings.tls is True
    assert settings.tls_key == tmp_path / "k.pem"
    assert settings.tls_ca == tmp_path / "ca.pem"
    # without flags the environment wins over the defaults
    env_only = worker.settings_from_args(parser.parse_args(["--queue", "cpu"]))
    assert env_only.address == "from-env:7233"
    assert env_only.namespace == "env-ns"


def test_api_key_is_a_secret_everywhere_it_can_be_printed(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KERNELOPT_API_KEY", API_KEY)
    settings = Settings.from_env()
    assert isinstance(settings.api_key, SecretStr)
    assert settings.api_key.get_secret_value() == API_KEY
    renderings = [
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        json.dumps(settings.model_dump(mode="json")),
        str(settings.model_dump()),
        f"{settings!r} {settings.api_key}",
    ]
    for text in renderings:
        assert API_KEY not in text


def test_proposer_config_carries_only_the_key_variable_name(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """Workflow inputs are history: the LLM key may travel only as the NAME of a variable."""
    from kernelopt.cli.parser import build_parser, campaign_options

    clean_env.setenv("OPENAI_API_KEY", LLM_KEY)
    clean_env.setenv("KERNELOPT_API_KEY", API_KEY)
    clean_env.setenv("KERNELOPT_LLM_BASE_URL", "http://llm.internal:8000/v1")
    clean_env.setenv("KERNELOPT_LLM_API_KEY_ENV", "OPENAI_API_KEY")
    args = build_parser().parse_args(["optimize", "problem.py", "--proposer", "llm"])
    options = campaign_options(args, Settings.from_env())
    assert isinstance(options, CampaignOptions)
    assert options.proposer.api_key_env == "OPENAI_API_KEY"
    dumped = options.model_dump_json()
    assert LLM_KEY not in dumped and API_KEY not in dumped
    # no field of the proposer's contract is shaped to hold a key itself
    for name, info in ProposerConfig.model_fields.items():
        if "key" in name:
            assert name == "api_key_env" and info.annotation is str


def test_cpu_worker_start_and_stop_logs_no_secret(temporal_settings: Settings, tmp_path: Path):
    """A real `python -m worker --queue cpu` with both keys set, debug JSON logs, then SIGTERM."""
    queue = f"secrets-{uuid.uuid4().hex[:8]}"
    env = python_env(
        env_for(temporal_settings),
        KERNELOPT_TEMPORAL_ADDRESS=temporal_settings.address,
        KERNELOPT_API_KEY=API_KEY,
        KERNELOPT_TLS="false",  # the dev server speaks plaintext; Cloud would use TLS
        KERNELOPT_CPU_QUEUE=queue,
        KERNELOPT_LOG_JSON="1",
        KERNELOPT_LOG_LEVEL="debug",
        OPENAI_API_KEY=LLM_KEY,
    )
    proc = spawn("cpu-worker", ["-m", "worker", "--queue", "cpu"], env, tmp_path)
    try:
        proc.wait_for("cpu worker ready", timeout=90)
    finally:
        rc = proc.terminate(timeout=60)
    out = proc.text()
    # Graceful shutdown completes ("shutting down" below, then a clean exit 0).
    assert rc == 0, out[-2000:]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    ready = [e for e in events if e.get("event") == "cpu worker ready"]
    assert ready and ready[0]["task_queue"] == queue
    assert ready[0]["address"] == temporal_settings.address
    assert any("shutting down" in e.get("event", "") for e in events)
    assert API_KEY not in out and LLM_KEY not in out


def test_gpu_worker_refusal_logs_no_secret(temporal_settings: Settings, tmp_path: Path):
    """The error path (no GPU here) is logged too; it must not print the settings."""
    from kernelopt.gpu_info import gpu_names

    if gpu_names():
        pytest.skip("this machine has a GPU: the worker would start instead of refusing")
    env = python_env(
        env_for(temporal_settings),
        KERNELOPT_TEMPORAL_ADDRESS=temporal_settings.address,
        KERNELOPT_API_KEY=API_KEY,
        KERNELOPT_LOG_LEVEL="debug",
        OPENAI_API_KEY=LLM_KEY,
    )
    proc = spawn("gpu-worker", ["-m", "worker", "--queue", "gpu"], env, tmp_path)
    rc = proc.popen.wait(timeout=90)
    out = proc.text()
    assert rc == 2 and "no CUDA GPU" in out, out[-2000:]
    assert API_KEY not in out and LLM_KEY not in out


async def test_an_api_key_is_never_sent_over_plaintext(
    clean_env: pytest.MonkeyPatch,
) -> None:
    from kernelopt import client as client_module

    seen: dict[str, object] = {}

    async def fake_connect(target_host: str, **kwargs: object) -> object:
        seen.update(kwargs, target_host=target_host)
        return object()

    clean_env.setattr(Client, "connect", fake_connect)
    settings = Settings(
        temporal_address="kernelopt.a1b2c.tmprl.cloud:7233",
        namespace="kernelopt.a1b2c",
        api_key=API_KEY,
    )
    await client_module.connect(settings)
    assert seen["api_key"] == API_KEY
    assert seen["tls"] is not False


async def test_supervised_children_do_not_inherit_secrets(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from activities.supervise import run_supervised
    from tests.deploy.env_probe import ProbeIn, ProbeOut

    clean_env.setenv("KERNELOPT_HOME", str(tmp_path))
    clean_env.setenv("KERNELOPT_API_KEY", API_KEY)
    clean_env.setenv("OPENAI_API_KEY", LLM_KEY)
    names = ["KERNELOPT_API_KEY", "OPENAI_API_KEY", "KERNELOPT_HOME"]
    out = await run_supervised(
        "tests.deploy.env_probe:probe",
        ProbeIn(names=names),
        ProbeOut,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert "KERNELOPT_HOME" in out.visible  # the probe works: ordinary settings pass
    assert "KERNELOPT_API_KEY" not in out.visible
    assert "OPENAI_API_KEY" not in out.visible


_LOG_PROBE = """
import logging, sys
from kernelopt.log import configure
configure(json=sys.argv[1] == "json", level="info", stream=sys.stdout)
def call_llm():
    key = sys.argv[2]  # a secret in a local variable, as in the LLM transport
    raise RuntimeError("upstream returned 500")
try:
    call_llm()
except RuntimeError:
    # what Temporal's activity logger does when an activity fails
    logging.getLogger("temporalio.activity").warning("Completing activity as failed", exc_info=True)
"""


def _log_failure(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _LOG_PROBE, mode, LLM_KEY],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(ROOT),
        env=python_env(dict(os.environ)),
    )
    assert done.returncode == 0, done.stderr
    assert "upstream returned 500" in done.stdout  # the failure itself is logged
    return done.stdout


def test_json_logs_of_a_failed_activity_hold_no_secret() -> None:
    assert LLM_KEY not in _log_failure("json")


def test_console_logs_of_a_failed_activity_hold_no_secret() -> None:
    assert LLM_KEY not in _log_failure("console")
