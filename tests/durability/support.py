"""Shared pieces of the durability tests: worker processes, servers, campaigns, counting.

Workers run as real OS processes (``tests.durability.worker_main``) whose
output goes to a log file (never a pipe nobody reads), so a test can SIGKILL
them, SIGSTOP them or let them run for minutes.  ``DevServer`` starts the same
``temporal server start-dev`` as the product's embedded server, on a SQLite
file, with optional dynamic-config overrides (e.g. a low continue-as-new
suggestion threshold) and a real ``kill -9``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.config import Settings
from kernelopt.contracts import (
    Budgets,
    CampaignOptions,
    CampaignPhase,
    CampaignProgress,
    Outcome,
    ProposerConfig,
    ProposerKind,
    SearchParams,
)
from kernelopt.store import open_store
from kernelopt.temporal_server import start_dev_command
from tests.support.campaigns import queues
from tests.support.paths import ROOT
from tests.support.processes import WorkerProcess

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"
HEARTBEAT_S = "3"  # GPU heartbeat timeout of the test workers (production: 2 minutes)
# three searchable targets (two kernels and a fusion group) with a built-in launch space
WRAPPER = ROOT / "tests" / "fixtures" / "compile" / "synthetic_partition_wrapper.py.txt"


class Worker(WorkerProcess):
    """``python -m tests.durability.worker_main KIND QUEUE``, logging into ``log_dir``: the
    GPU doubles with a short heartbeat timeout on the synthetic wrapper's targets."""

    module = "tests.durability.worker_main"

    def __init__(self, settings: Settings, kind: str, queue: str, log_dir: Path, **env: str):
        base = {
            "KERNELOPT_TEST_HEARTBEAT_S": HEARTBEAT_S,
            "KERNELOPT_DOUBLES_WRAPPER": str(WRAPPER),
        }
        super().__init__(settings, kind, queue, log_dir, **{**base, **env})


@contextlib.contextmanager
def double_workers(settings: Settings, logs: Path, gpu_delay: str, gpus: int = 1, **gpu_env: str):
    """A CPU worker and ``gpus`` GPU-doubles workers on fresh queues; yields (cpu_q, gpu_q).

    ``gpu_env``: what the doubles do differently (``KERNELOPT_DOUBLES_*``).
    """
    cpu_q, gpu_q = queues()
    workers = [Worker(settings, "cpu", cpu_q, logs)]
    workers += [
        Worker(settings, "gpu", gpu_q, logs, KERNELOPT_DOUBLES_DELAY=gpu_delay, **gpu_env)
        for _ in range(gpus)
    ]
    try:
        for w in workers:
            w.wait_ready()
        yield cpu_q, gpu_q
    finally:
        for w in workers:
            w.stop()


def module_workers(logs: str, gpu_delay: str):
    """A module-scoped ``workers`` fixture: one CPU and one GPU-doubles worker (GPU steps take
    ``gpu_delay`` s) for every campaign of the module, logging to a fresh ``logs`` folder."""

    @pytest.fixture(scope="module")
    def workers(temporal_settings: Settings, tmp_path_factory: pytest.TempPathFactory):
        with double_workers(temporal_settings, tmp_path_factory.mktemp(logs), gpu_delay) as qs:
            yield qs

    return workers


class DevServer:
    """``temporal server start-dev`` on a SQLite file, with dynamic-config overrides."""

    def __init__(self, settings: Settings, dynamic: dict[str, object] | None = None) -> None:
        self.settings = settings
        self.dynamic = dynamic or {}
        self.db = settings.server_dir / "temporal.db"
        self.log_path = settings.server_dir / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, wait_s: float = 60.0) -> DevServer:
        self.settings.server_dir.mkdir(parents=True, exist_ok=True)
        cmd = start_dev_command(self.settings, self.db, headless=True)
        for key, value in self.dynamic.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dev server exited: {self.log_path.read_text()[-2000:]}")
            if _port_open(self.settings.server_port):
                return self
            time.sleep(0.1)
        raise RuntimeError("dev server did not open its port")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def options(
    cpu_queue: str,
    gpu_queue: str,
    iterations: int = 2,
    plans: int = 2,
    beam: int = 2,
    budgets: Budgets | None = None,
    **extra: object,
) -> CampaignOptions:
    return CampaignOptions(
        search=SearchParams(iterations=iterations, plans=plans, retries=1, beam=beam),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        cpu_queue=cpu_queue,
        gpu_queue=gpu_queue,
        search_library_dominated=True,
        budgets=budgets or Budgets(),
        **extra,
    )


async def submit(
    client: Client, settings: Settings, opts: CampaignOptions, campaign_id: str | None = None
) -> WorkflowHandle:
    problem = prepare_problem(PROBLEM, open_store(settings.artifacts_dir))
    return await start_campaign(client, problem, opts, campaign_id=campaign_id)


async def outcome_of(client: Client, workflow_id: str) -> Outcome:
    return await client.get_workflow_handle(workflow_id, result_type=Outcome).result()


async def progress(handle: WorkflowHandle) -> CampaignProgress:
    return await handle.query("progress", result_type=CampaignProgress)


async def wait_until(predicate, timeout: float = 60.0, every: float = 0.1, what: str = "") -> None:
    """Poll an (async or plain) predicate until it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        await asyncio.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what or predicate}")


async def wait_for_phase(handle: WorkflowHandle, phase: CampaignPhase, timeout: float = 60) -> None:
    async def reached() -> bool:
        return (await progress(handle)).phase == phase

    await wait_until(reached, timeout, what=f"phase {phase.value}")


async def gate_calls(client: Client, workflow_id: str) -> Counter:
    """How often each candidate id was scheduled on gate_candidate, over every search run."""
    from kernelopt.audit.runs import campaign_histories

    counts: Counter = Counter()
    for run, history in await campaign_histories(client, workflow_id):
        if run.workflow_type != "SearchKernel":
            continue
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name != "gate_candidate":
                continue
            (payload,) = attrs.input.payloads
            data = pydantic_data_converter.payload_converter.from_payload(payload)
            counts[data["candidate_id"]] += 1
    return counts


# --- soundness after a fault ------------------------------------------------------------------
def decisions_of(report) -> dict[str, tuple]:
    """Per candidate: passed gates 1-2, deciding gate, final decision (comparable across runs)."""
    return {c.id: (c.passed_gates_1_2, c.deciding_gate, c.final) for c in report.candidates}


def comparable(outcome) -> tuple:
    return (
        outcome.category,
        round(outcome.speedup, 6),
        tuple(outcome.replaced),
        outcome.candidates_tried,
    )


async def assert_consistent(client: Client, settings: Settings, workflow_id: str):
    """The campaign ended in an outcome whose audit holds, no candidate gated twice and
    every target's GPU time charged; (outcome, audit report)."""
    from kernelopt.audit import load_report

    outcome = await client.get_workflow_handle(workflow_id, result_type=Outcome).result()
    report = await load_report(client, workflow_id, open_store(settings.artifacts_dir))
    failed = [c for c in report.checks if not c.ok]
    assert not failed, f"audit checks failed: {failed}"
    counts = await gate_calls(client, workflow_id)
    assert counts and max(counts.values()) == 1, f"a candidate was gated twice: {counts}"
    assert report.used.gpu_seconds >= sum(t.gpu_seconds for t in report.targets)
    return outcome, report


async def assert_sound(client: Client, settings: Settings, workflow_id: str, reference):
    """The campaign ended like an undisturbed one: same decisions, nothing lost or doubled."""
    outcome, report = await assert_consistent(client, settings, workflow_id)
    assert comparable(report.outcome) == comparable(reference.outcome)
    assert decisions_of(report) == decisions_of(reference), "decisions differ from the reference"
    return outcome, report


async def export_of(client: Client, workflow_id: str, cpu_queue: str):
    """The ExportCampaign result of a closed campaign, starting the export unless the campaign did."""
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from kernelopt.contracts.audit import (
        EXPORT_CAMPAIGN,
        ExportCampaignInput,
        ExportIndexResult,
    )
    from workflows.export_campaign import export_workflow_id

    try:
        handle = await client.start_workflow(
            EXPORT_CAMPAIGN,
            ExportCampaignInput(
                campaign_id=workflow_id, workflow_id=workflow_id, cpu_queue=cpu_queue
            ),
            id=export_workflow_id(workflow_id),
            task_queue=cpu_queue,
            result_type=ExportIndexResult,
        )
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle(
            export_workflow_id(workflow_id), result_type=ExportIndexResult
        )
    return await handle.result()


async def reference_report(
    client: Client,
    settings: Settings,
    logs: Path,
    start=None,
    gpu_kind: str = "gpu",
    worker_env: dict[str, str] | None = None,
    timeout_s: float = 120.0,
    **opts: object,
):
    """An undisturbed campaign with ``options(**opts)``, or the one ``start(client,
    cpu_queue, gpu_queue)`` submits: what every faulty run must reproduce."""
    from kernelopt.audit import load_report

    cpu_q, gpu_q = queues()
    env = worker_env or {}
    cpu = Worker(settings, "cpu", cpu_q, logs, **env)
    gpu = Worker(settings, gpu_kind, gpu_q, logs, KERNELOPT_DOUBLES_DELAY="0", **env)
    try:
        cpu.wait_ready(), gpu.wait_ready(timeout_s)
        if start is not None:
            handle = await start(client, cpu_q, gpu_q)
        else:
            handle = await submit(client, settings, options(cpu_q, gpu_q, **opts))
        await asyncio.wait_for(handle.result(), timeout_s)
        report = await load_report(client, handle.id, open_store(settings.artifacts_dir))
    finally:
        cpu.stop()
        gpu.stop()
    if report.outcome is None or report.outcome.candidates_tried == 0:
        raise RuntimeError("the reference campaign tried no candidate")
    return report
