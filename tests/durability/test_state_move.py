"""One campaign carried across lost machines with ``kernelopt state export`` / ``state import``.

Each "loan" is a fresh machine: its own ``KERNELOPT_HOME`` (another directory),
its own embedded dev server on its own ports, its own CPU worker and GPU-doubles
worker.  A loan ends by losing the machine -- server and workers SIGKILLed,
like the other fault tests, so nothing is flushed or stopped cleanly -- and the
state is exported from the dead home as it was left (the real CLI, in a child
process), imported into the next loan's empty home, and the campaign continues
there.  It must end like the undisturbed reference campaign (``assert_sound``:
same decisions, every candidate gated once in the histories), no gate body may
have run twice (physical executions, ``executions.py``), GPU-seconds must be
charged across the loans without a reset (the total equals the sum of what the
finished GPU activities report), and the audit must show each loss and resume.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.audit import load_report
from kernelopt.audit.runs import campaign_histories
from kernelopt.cli import output
from kernelopt.cli.app import main
from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.store import open_store
from kernelopt.temporal_server import EmbeddedServer
from tests.durability.executions import EXECUTIONS_ENV, doubled, executions
from tests.durability.support import (
    Worker,
    assert_sound,
    gate_calls,
    options,
    progress,
    queues,
    submit,
    wait_until,
)
from tests.support.short_heartbeats import CPU_HEARTBEAT_ENV
from tests.support.temporal import env_for, make_settings

GATED_PER_LOAN = 2  # candidates gated in a loan before its machine is lost


def kernelopt(monkeypatch: pytest.MonkeyPatch, settings: Settings, *args: str) -> str:
    """The CLI's ``main`` on ``settings``' home (in this process: a child would spend seconds
    importing); what it printed, or the test fails with it."""
    out, err = io.StringIO(), io.StringIO()
    with monkeypatch.context() as patch:
        patch.setattr(output, "console", Console(file=out, width=200))
        patch.setattr(output, "err_console", Console(file=err, width=200))
        for key, value in env_for(settings).items():
            if key.startswith("KERNELOPT_"):
                patch.setenv(key, value)
        code = main(list(args))
    assert code == 0, f"kernelopt {' '.join(args)}:\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue()


def gated(path: Path) -> int:
    """Finished physical gate_candidate executions so far, over every machine."""
    return sum(1 for call in executions(path) if call[0] == "gate_candidate")


class Machine:
    """One loan: a home, its dev server and its workers, all lost together."""

    def __init__(self, home: Path, cpu_q: str, gpu_q: str, logs: Path, env: dict[str, str]):
        self.settings = make_settings(home)
        self.server = EmbeddedServer(self.settings)
        self.cpu_q, self.gpu_q, self.logs, self.env = cpu_q, gpu_q, logs, env
        self.workers: list[Worker] = []
        self.lost = False

    async def boot(self) -> Client:
        self.server.start()
        self.workers = [
            Worker(self.settings, "cpu", self.cpu_q, self.logs, **self.env),
            Worker(
                self.settings,
                "gpu",
                self.gpu_q,
                self.logs,
                KERNELOPT_DOUBLES_DELAY="0.2",
                **self.env,
            ),
        ]
        for w in self.workers:
            w.wait_ready()
        return await connect(self.settings, start_embedded=False)

    def lose(self, killed: dict[int, float]) -> None:
        """SIGKILL to the server and every worker: a preempted machine, no goodbye.  The
        server's pid file stays behind, as it would on a disk that outlived its machine."""
        pid = self.server.status().pid
        assert pid is not None, "the server was not running"
        for w in self.workers:
            killed[w.proc.pid] = time.time()
            w.kill()
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.lost = True

    def shut(self) -> None:
        """Stop what still runs; a lost machine's pid file is left for the export to see."""
        for w in self.workers:
            w.stop()
        if not self.lost:
            self.server.stop()


async def _gpu_charges(client: Client, workflow_id: str, gpu_queue: str) -> dict[str, float]:
    """The campaign's GPU charges recomputed from its histories, per workflow run type.

    The workflows' rule: a finished GPU activity charges the run time it reports
    (``device_seconds``); one that reports none (some doubles) is charged, by the
    campaign, its time from the workflow task that scheduled it to the one that saw it
    finish (``workflow.now()`` is the start of the workflow task), and, by a search, the
    profiler's own seconds.  A reset on a new machine would break the equality.
    """
    from kernelopt.audit.history import event_time

    totals: dict[str, float] = {}
    for run, history in await campaign_histories(client, workflow_id):
        if history is None:
            continue
        scheduled: dict[int, tuple[str, object]] = {}
        task_started = None  # the workflow task now running: its start is workflow.now()
        pending: list[tuple[object, dict]] = []  # finished, waiting for the next task
        for event in history.events:
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                task_started = event_time(event)
                for began, data in pending:
                    charge = data.get("device_seconds")
                    if charge is None:
                        if run.workflow_type == "SearchKernel":
                            charge = data.get("gpu_seconds", 0.0)
                        else:
                            charge = (task_started - began).total_seconds()
                    totals[run.workflow_type] = totals.get(run.workflow_type, 0.0) + charge
                pending = []
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.task_queue.name == gpu_queue:
                    scheduled[event.event_id] = (attrs.activity_type.name, task_started)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                attrs = event.activity_task_completed_event_attributes
                if attrs.scheduled_event_id in scheduled:
                    (payload,) = attrs.result.payloads
                    data = pydantic_data_converter.payload_converter.from_payload(payload)
                    pending.append((scheduled[attrs.scheduled_event_id][1], data))
            elif kind in (
                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
                EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
            ):
                raise AssertionError(f"a GPU activity ended without a result: {event}")
    return totals


async def _carry(reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, losses: int) -> None:
    runs = tmp_path / "executions.jsonl"
    # short CPU heartbeats: a lost CPU worker's activity moves on in seconds (the GPU
    # doubles' heartbeat is already 3 s); production's timeouts only take longer
    env = {EXECUTIONS_ENV: str(runs), CPU_HEARTBEAT_ENV: "5"}
    cpu_q, gpu_q = queues()
    killed: dict[int, float] = {}
    machines = [
        Machine(tmp_path / f"machine-{i}" / "home", cpu_q, gpu_q, tmp_path / "logs", env)
        for i in range(losses + 1)
    ]
    charged_at_loss: list[float] = []
    campaign_id = ""
    for loan, machine in enumerate(machines):
        if loan:
            archive = tmp_path / f"after-loss-{loan}.tar.gz"
            exported = kernelopt(
                monkeypatch, machines[loan - 1].settings, "state", "export", str(archive)
            )
            assert "server lost" in exported, exported
            assert not machine.settings.home.exists(), "a fresh machine starts with no home"
            restored = kernelopt(monkeypatch, machine.settings, "state", "import", str(archive))
            assert "restored" in restored and "artifacts" in restored, restored
        client = await machine.boot()
        try:
            if loan == 0:
                handle = await submit(client, machine.settings, options(cpu_q, gpu_q))
                campaign_id = handle.id
            else:
                handle = client.get_workflow_handle(campaign_id)
                # the campaign is where the lost machine left it: nothing charged was reset
                now = (await progress(handle)).used.gpu_seconds
                assert now >= charged_at_loss[-1] - 1e-9, (now, charged_at_loss)
            if loan < losses:
                target = gated(runs) + GATED_PER_LOAN
                await wait_until(
                    lambda t=target: gated(runs) >= t, 120, what=f"{target} gated candidates"
                )
                charged_at_loss.append((await progress(handle)).used.gpu_seconds)
                machine.lose(killed)
                continue
            await asyncio.wait_for(
                assert_sound(client, machine.settings, campaign_id, reference), 180
            )
            store = open_store(machine.settings.artifacts_dir)
            report = await load_report(client, campaign_id, store)
            charged = await _gpu_charges(client, campaign_id, gpu_q)
            counts = await gate_calls(client, campaign_id)
        finally:
            machine.shut()

    # no gate body ran twice, on any machine (a kill right after a finished body excused)
    assert not doubled(runs, killed), doubled(runs, killed)
    # ... and none was lost: every gate call in the histories ran to its end once
    assert gated(runs) == sum(counts.values()), (gated(runs), counts)
    # and every loan did some of the gating: the campaign went on where it stopped
    gate_pids = {
        r["pid"]
        for (name, *_), rs in executions(runs).items()
        if name == "gate_candidate"
        for r in rs
    }
    assert all(m.workers[1].proc.pid in gate_pids for m in machines), "a loan gated nothing"
    # GPU-seconds: the campaign's total is what its GPU activities reported, over all loans
    assert report.used.gpu_seconds > 0
    assert abs(report.used.gpu_seconds - sum(charged.values())) < 1e-3, (report.used, charged)
    searches = sum(t.gpu_seconds for t in report.targets)
    assert abs(searches - charged.get("SearchKernel", 0.0)) < 1e-6, (searches, charged)
    # the audit shows each loss and each resume, in order, one per loan boundary
    assert [m.source_server for m in report.moves] == ["lost"] * losses
    homes = [str(m.settings.home) for m in machines]
    assert [m.imported_to.split(":", 1)[1] for m in report.moves] == homes[1:]
    assert [m.exported_from.split(":", 1)[1] for m in report.moves] == homes[:-1]
    for move in report.moves:
        times = [move.last_write_at, move.exported_at, move.imported_at]
        assert sorted(times, key=datetime.fromisoformat) == times, move


async def test_campaign_carried_across_three_loans_and_two_lost_machines(
    reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About 45 s on a 2-CPU machine (three servers and worker pairs start), inside the
    minute a durability test may take, so it runs by default."""
    await _carry(reference, tmp_path, monkeypatch, losses=2)


@pytest.mark.slow  # about 40 s; the default run already carries a campaign across losses
async def test_a_snapshot_taken_while_running_resumes_a_machine_lost_later(
    reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic-export pattern of a preemptible loan: export while the campaign runs,
    keep working, lose the machine, resume from the (older) snapshot.  The histories go
    back to the snapshot, so what ran after it runs again (or is found in the result
    index); the campaign must still end like the undisturbed one."""
    runs = tmp_path / "executions.jsonl"
    env = {EXECUTIONS_ENV: str(runs), CPU_HEARTBEAT_ENV: "5"}
    cpu_q, gpu_q = queues()
    first, second = (
        Machine(tmp_path / f"machine-{i}" / "home", cpu_q, gpu_q, tmp_path / "logs", env)
        for i in range(2)
    )
    archive = tmp_path / "snapshot.tar.gz"
    client = await first.boot()
    try:
        handle = await submit(client, first.settings, options(cpu_q, gpu_q))
        await wait_until(lambda: gated(runs) >= GATED_PER_LOAN, 120, what="gated candidates")
        exported = kernelopt(monkeypatch, first.settings, "state", "export", str(archive))
        assert "server running" in exported, exported
        after = gated(runs) + 1
        await wait_until(lambda: gated(runs) >= after, 120, what="work after the snapshot")
        first.lose({})
    finally:
        first.shut()
    kernelopt(monkeypatch, second.settings, "state", "import", str(archive))
    client = await second.boot()
    try:
        _, report = await asyncio.wait_for(
            assert_sound(client, second.settings, handle.id, reference), 180
        )
    finally:
        second.shut()
    assert [m.source_server for m in report.moves] == ["running"]
