"""Client commands leave before interpreter finalisation, with their output and status intact.

Finalisation is where the Temporal SDK's native threads can abort a process that
already succeeded (``kernelopt.cli.process_exit``).  A ``sitecustomize`` probe on
the child's path reports whether finalisation began: the interpreter flushes
``sys.stdout`` once more after it starts finalising, and the probe's stdout says so.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from kernelopt.cli.process_exit import system_exit_code
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings

FINALISING = "PROBE: interpreter finalising"
PROBE = f'''
import io
import os
import sys


class _Stdout(io.TextIOWrapper):
    def flush(self) -> None:
        if sys.is_finalizing():
            os.write(2, b"{FINALISING}\\n")
        super().flush()


sys.stdout = _Stdout(sys.stdout.detach(), encoding="utf-8")
'''


def kernelopt(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    """``python -m kernelopt.cli ARGS`` (the process entry point) with the probe loaded."""
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    env = {
        **env_for(make_settings(tmp_path / "home")),
        "PYTHONPATH": f"{probe}:{ROOT}",
        **extra_env,
    }
    return run_cli(args, env, stdin=subprocess.DEVNULL)


def test_the_probe_sees_finalisation_of_a_command_that_does_not_use_temporal(tmp_path):
    done = kernelopt(tmp_path, "server", "status")
    assert done.returncode == 3, done.stderr  # stopped
    assert "stopped" in done.stdout
    assert FINALISING in done.stderr


def test_pending_leaves_before_finalising_with_its_whole_listing(tmp_path):
    requests = tmp_path / "home" / "llm" / "requests"
    requests.mkdir(parents=True)
    ids = [f"camp-k0-r0-execute-{n}" for n in range(40)]  # more than one pipe buffer's worth
    for rid in ids:
        (requests / f"{rid}.json").write_text(
            json.dumps({"request_id": rid, "role": "execute", "round": 0, "age_s": 5})
        )
    done = kernelopt(tmp_path, "pending")
    assert done.returncode == 0, done.stderr
    assert FINALISING not in done.stderr
    assert f"{len(ids)} LLM request(s) waiting" in done.stdout
    assert all(rid in done.stdout for rid in ids)
    assert done.stdout.rstrip().endswith("Answer with: kernelopt reply ID FILE")


@pytest.mark.parametrize("args", [["list"], ["reply", "no-such-request", "-"]])
def test_a_failing_client_command_keeps_its_status_and_message(tmp_path, args):
    done = kernelopt(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert FINALISING not in done.stderr
    assert f"kernelopt {args[0]}:" in done.stderr


async def test_reply_signals_over_a_real_client_then_leaves_before_finalising(env, tmp_path):
    """The command of the CI failure: a real Temporal client, one signal, status 0."""
    handle = await env.client.start_workflow(
        "NoWorkerRunsThis", id=f"wait-{uuid.uuid4().hex[:8]}", task_queue=f"none-{uuid.uuid4()}"
    )
    requests = tmp_path / "home" / "llm" / "requests"
    requests.mkdir(parents=True)
    (requests / "r1.json").write_text(json.dumps({"request_id": "r1", "workflow_id": handle.id}))
    answer = tmp_path / "answer.md"
    answer.write_text("the reply\n")
    done = kernelopt(
        tmp_path,
        "reply",
        "r1",
        str(answer),
        KERNELOPT_TEMPORAL_ADDRESS=env.client.service_client.config.target_host,
        KERNELOPT_NAMESPACE=env.client.namespace,
    )
    assert done.returncode == 0, done.stderr
    assert FINALISING not in done.stderr
    assert "r1: reply written to" in done.stdout and "the search was told" in done.stdout
    assert (tmp_path / "home" / "llm" / "replies" / "r1.md").read_text() == "the reply\n"
    await handle.terminate()


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (4, 4), ("a message", 1)])
def test_system_exit_code_matches_the_interpreter(code, status):
    assert system_exit_code(SystemExit(code)) == status
