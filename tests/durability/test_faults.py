"""Faults on the real dev server with real worker processes; every campaign must still end soundly.

Each test breaks something mid-campaign -- a GPU worker SIGKILLed in the middle
of a checkpointing activity, an activity that stops heartbeating, a GPU
worker that is gone for a long while, the server itself killed with -9 --
and then checks, against an undisturbed reference campaign, that the
campaign completed with the same decisions, no candidate lost or gated
twice, and budgets that add up (``assert_sound``).  The CPU-worker SIGKILL
and the graceful server restart live in tests/e2e/test_campaign_e2e.py.

GPU heartbeat timeouts are 3 s in these workers (production: 2 minutes) so a
dead worker is noticed quickly; everything else is production code.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
from pathlib import Path

from rich.console import Console
from temporalio.client import Client, WorkflowExecutionStatus

from kernelopt.audit.waiting import pending_work
from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.contracts import CampaignPhase, Outcome
from kernelopt.follow import follow, has_pollers
from kernelopt.temporal_server import EmbeddedServer
from tests.durability.support import (
    Worker,
    assert_sound,
    double_workers,
    options,
    progress,
    queues,
    submit,
    wait_for_phase,
    wait_until,
)
from tests.support.temporal import make_settings


def records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_gpu_worker_sigkill_mid_activity_resumes_from_its_checkpoint(
    client: Client, temporal_settings: Settings, reference, tmp_path: Path
) -> None:
    progress_log = tmp_path / "progress.jsonl"
    env = {
        "KERNELOPT_DOUBLES_DELAY": "0.05",
        "KERNELOPT_DOUBLES_SLOW": "gate_model=6",  # 120 steps of 50 ms
        "KERNELOPT_DOUBLES_CHECKPOINT": "gate_model",
        "KERNELOPT_DOUBLES_PROGRESS": str(progress_log),
    }
    cpu_q, gpu_q = queues()
    cpu = Worker(temporal_settings, "cpu", cpu_q, tmp_path)
    gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, **env)
    try:
        cpu.wait_ready(), gpu.wait_ready()
        handle = await submit(client, temporal_settings, options(cpu_q, gpu_q))

        def deep_in_gate_model() -> bool:
            # past the second heartbeat (throttled to 0.8 x 3 s), so the server holds a detail > 0
            return any(
                r["activity"] == "gate_model" and r["step"] >= 70 for r in records(progress_log)
            )

        await wait_until(deep_in_gate_model, 90, what="gate_model at step 70")
        killed_pid = gpu.proc.pid
        gpu.kill()
        gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, **env).wait_ready()
        outcome, report = await asyncio.wait_for(
            assert_sound(client, temporal_settings, handle.id, reference), 120
        )
    finally:
        cpu.stop()
        gpu.stop()

    steps = [r for r in records(progress_log) if r["activity"] == "gate_model"]
    first = [r for r in steps if r["pid"] == killed_pid]
    key = first[0]["key"]
    retry = [r for r in steps if r["key"] == key and r["attempt"] == 2]
    assert retry, "the interrupted gate_model never ran a second attempt"
    resumed = retry[0]["resumed_from"]
    last_done = max(r["step"] for r in first)
    # resumed from its heartbeat checkpoint: not from scratch, and not past what was done
    assert 0 < resumed <= last_done, (resumed, last_done)
    assert min(r["step"] for r in retry) == resumed
    assert max(r["step"] for r in retry) == retry[0]["steps"] - 1
    # the audit shows the infrastructure incident, separate from any verdict
    incidents = [i for i in report.incidents if i.activity == "gate_model"]
    assert incidents and incidents[0].attempts == 2
    assert "heartbeat" in incidents[0].last_failure.lower()
    assert outcome.category == reference.outcome.category


async def test_stuck_activity_is_retried_after_its_heartbeat_timeout(
    client: Client, temporal_settings: Settings, reference, tmp_path: Path
) -> None:
    marker = tmp_path / "hung-once"
    log = tmp_path / "log.jsonl"
    hangs = {
        "KERNELOPT_DOUBLES_HANG": f"gate_candidate={marker}",
        "KERNELOPT_DOUBLES_HANG_S": "120",  # far longer than the test: only the timeout ends it
        "KERNELOPT_DOUBLES_LOG": str(log),
    }
    with double_workers(temporal_settings, tmp_path, "0.05", **hangs) as (cpu_q, gpu_q):
        handle = await submit(client, temporal_settings, options(cpu_q, gpu_q))

        async def timed_out_once() -> bool:
            work = await pending_work(client, handle.id)
            return any(w.attempt >= 2 and "heartbeat" in w.last_failure.lower() for w in work)

        await wait_until(timed_out_once, 60, every=0.25, what="a heartbeat timeout")
        await asyncio.wait_for(assert_sound(client, temporal_settings, handle.id, reference), 120)
    assert marker.exists()
    retried = [r for r in records(log) if r["activity"] == "gate_candidate" and r["attempt"] == 2]
    assert len(retried) == 1, "exactly the hung call needed a second attempt"


async def test_campaign_waits_for_a_missing_gpu_worker_and_resumes_when_one_joins(
    client: Client, temporal_settings: Settings, reference, tmp_path: Path
) -> None:
    progress_log = tmp_path / "progress.jsonl"
    env = {
        "KERNELOPT_DOUBLES_DELAY": "0.05",
        "KERNELOPT_DOUBLES_SLOW": "gate_candidate=1",
        "KERNELOPT_DOUBLES_PROGRESS": str(progress_log),
    }
    cpu_q, gpu_q = queues()
    cpu = Worker(temporal_settings, "cpu", cpu_q, tmp_path).wait_ready()
    gpu = None
    try:
        handle = await submit(client, temporal_settings, options(cpu_q, gpu_q))
        # 1. no GPU worker has ever polled: the campaign waits on it, and says so
        await wait_until(
            lambda: _waiting_on(handle, gpu_q), 30, what="progress.waiting_on the GPU queue"
        )
        assert not await has_pollers(client, gpu_q)
        console = Console(file=io.StringIO(), width=200, record=True)
        watcher = asyncio.create_task(follow(client, handle, console, gpu_q, poll_s=0.2))
        await asyncio.sleep(1.5)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        assert "waiting for a GPU worker on task queue" in console.export_text()
        work = await pending_work(client, handle.id)
        assert [w.activity for w in work if w.waiting_for_worker] == ["compile"]

        # 2. a GPU worker joins, then dies mid-search and does not come back
        gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, **env).wait_ready()

        def gating() -> bool:  # a candidate is on the GPU right now
            return any(r["activity"] == "gate_candidate" for r in records(progress_log))

        await wait_until(gating, 60, every=0.05, what="a gate_candidate in progress")
        gpu.kill()

        async def stranded() -> bool:
            work = await pending_work(client, handle.id)
            return any(
                w.waiting_for_worker and w.attempt >= 2 and "heartbeat" in w.last_failure.lower()
                for w in work
            )

        await wait_until(stranded, 60, every=0.25, what="a GPU retry waiting for a worker")
        before = await progress(handle)
        await asyncio.sleep(3.0)  # nobody to run it: the campaign waits, it does not fail
        desc = await handle.describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING
        after = await progress(handle)
        assert after.phase == CampaignPhase.SEARCHING
        assert after.candidates_tried == before.candidates_tried

        # 3. a new GPU worker joins: the campaign finishes as if nothing happened
        gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, **env).wait_ready()
        await asyncio.wait_for(assert_sound(client, temporal_settings, handle.id, reference), 120)
    finally:
        cpu.stop()
        if gpu is not None:
            gpu.stop()


async def _waiting_on(handle, queue: str) -> bool:
    p = await progress(handle)
    return p.phase == CampaignPhase.COMPILING and p.waiting_on == queue


async def test_server_kill9_and_restart_on_the_same_sqlite_file(reference, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    server = EmbeddedServer(settings)
    server.start()
    cpu_q, gpu_q = queues()
    env = {"KERNELOPT_DOUBLES_DELAY": "0.3"}
    cpu = Worker(settings, "cpu", cpu_q, tmp_path)
    gpu = Worker(settings, "gpu", gpu_q, tmp_path, **env)
    try:
        cpu.wait_ready(), gpu.wait_ready()
        client = await connect(settings, start_embedded=False)
        handle = await submit(client, settings, options(cpu_q, gpu_q))
        await wait_for_phase(handle, CampaignPhase.SEARCHING, 60)
        await asyncio.sleep(0.5)
        pid = server.status().pid
        os.killpg(pid, signal.SIGKILL)  # kill -9: no flush, no goodbye
        os.waitpid(pid, 0)
        assert not server.status().running
        await asyncio.sleep(1.0)
        server.start()  # same SQLite file under the same home
        client = await connect(settings, start_embedded=False)
        handle = client.get_workflow_handle(handle.id, result_type=Outcome)
        outcome = await asyncio.wait_for(handle.result(), 180)
        await assert_sound(client, settings, handle.id, reference)
    finally:
        cpu.stop()
        gpu.stop()
        server.stop()
    assert outcome.category == reference.outcome.category
