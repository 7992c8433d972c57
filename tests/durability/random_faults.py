"""Seeded random SIGKILLs of the CPU worker, the GPU workers and the server during campaigns.

``run_chaos`` keeps ``parallel`` campaigns in flight on one CPU worker and two
GPU-double workers against a real dev server (its own SQLite file) and, at
random moments, SIGKILLs one of the three kinds of process, restarting it
after a random pause (a restarted worker is not waited for: the next fault
may hit it while it starts).  When ``kills`` faults have been injected it lets
every campaign finish, then hands back what the test compares: each
campaign's id, every kill, and the file of physical GPU executions.  All randomness comes
from ``random.Random(seed)``, so a failing run can be repeated from its seed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from kernelopt.client import connect
from kernelopt.config import Settings
from tests.durability.executions import EXECUTIONS_ENV, doubled, executions
from tests.durability.support import DevServer, Worker, options, queues, submit
from tests.support.short_heartbeats import CPU_HEARTBEAT_ENV

TARGETS = ("cpu", "gpu", "server")
CPU_HEARTBEAT_S = "3"  # as the GPU workers' (support.HEARTBEAT_S)


@dataclass
class Kill:
    at: float
    target: str
    pid: int
    down_s: float


@dataclass
class ChaosRun:
    seed: int
    campaigns: list[str] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    executions: Path = Path()
    seconds: float = 0.0

    def killed_pids(self) -> dict[int, float]:
        return {k.pid: k.at for k in self.kills if k.target != "server"}

    def summary(self) -> str:
        by = {t: sum(1 for k in self.kills if k.target == t) for t in TARGETS}
        return (
            f"seed {self.seed}: {len(self.kills)} kills ({by}), "
            f"{len(self.campaigns)} campaigns, {self.seconds:.0f} s"
        )


async def _client(settings: Settings) -> Client:
    return await connect(settings, start_embedded=False)


async def _open(client: Client, ids: list[str]) -> list[str]:
    out = []
    for workflow_id in ids:
        desc = await client.get_workflow_handle(workflow_id).describe()
        if desc.status == WorkflowExecutionStatus.RUNNING:
            out.append(workflow_id)
    return out


Start = Callable[[Client, str, str], Awaitable[WorkflowHandle]]


async def run_chaos(
    settings: Settings,
    logs: Path,
    seed: int,
    kills: int,
    parallel: int = 2,
    gap_s: tuple[float, float] = (0.5, 3.0),
    down_s: tuple[float, float] = (0.2, 3.0),
    finish_timeout_s: float = 300.0,
    start: Start | None = None,
    gpu_kind: str = "gpu",
    gpu_workers: int = 2,
    worker_env: dict[str, str] | None = None,
    ready_s: float = 60.0,
) -> ChaosRun:
    """``start(client, cpu_queue, gpu_queue)`` submits one campaign (by default
    ``support.options`` on the relu chain); ``gpu_kind`` "gpu-real" runs the real GPU
    activities (``worker_main``), with ``worker_env`` given to every worker."""
    rng = random.Random(seed)
    run = ChaosRun(seed=seed, executions=logs / "executions.jsonl")
    started = time.monotonic()
    server = DevServer(settings).start()
    cpu_q, gpu_q = queues()
    extra = worker_env or {}
    env = {"KERNELOPT_DOUBLES_DELAY": "0.3", EXECUTIONS_ENV: str(run.executions), **extra}
    # a killed CPU worker's activity is retried after seconds, not production's 30 s
    # (test_cpu_worker_kill checks that bound; here only soundness is at stake)
    cpu_env = {CPU_HEARTBEAT_ENV: CPU_HEARTBEAT_S, **extra}
    kinds = {"cpu": "cpu", "gpu": gpu_kind}
    workers = {
        "cpu": [Worker(settings, "cpu", cpu_q, logs, **cpu_env)],
        "gpu": [Worker(settings, gpu_kind, gpu_q, logs, **env) for _ in range(gpu_workers)],
    }

    async def submit_one(client: Client) -> WorkflowHandle:
        if start is not None:
            return await start(client, cpu_q, gpu_q)
        return await submit(client, settings, options(cpu_q, gpu_q))

    try:
        for w in [*workers["cpu"], *workers["gpu"]]:
            w.wait_ready(ready_s)
        client = await _client(settings)
        while len(run.kills) < kills:
            open_ = await _open(client, run.campaigns)
            for _ in range(parallel - len(open_)):
                run.campaigns.append((await submit_one(client)).id)
            await asyncio.sleep(rng.uniform(*gap_s))
            target = rng.choice(TARGETS)
            pause = rng.uniform(*down_s)
            if target == "server":
                pid = server.proc.pid
                server.kill9()
            else:
                victim = rng.choice(workers[target])
                pid = victim.proc.pid
                victim.kill()
            run.kills.append(Kill(at=time.time(), target=target, pid=pid, down_s=pause))
            await asyncio.sleep(pause)
            if target == "server":
                server.start()
                client = await _client(settings)
            else:
                kind_env = env if target == "gpu" else cpu_env
                # not waited for: the next fault may come while it is still starting
                fresh = Worker(settings, kinds[target], victim.queue, logs, **kind_env)
                workers[target] = [fresh if w is victim else w for w in workers[target]]
        for w in [*workers["cpu"], *workers["gpu"]]:
            w.wait_ready(ready_s)  # a restart that failed is named here, not as a stuck campaign
        deadline = time.monotonic() + finish_timeout_s
        while await _open(client, run.campaigns):
            if time.monotonic() > deadline:
                raise TimeoutError(f"campaigns still open after the faults ({run.summary()})")
            await asyncio.sleep(0.5)
    finally:
        for w in [*workers["cpu"], *workers["gpu"]]:
            w.stop()
        run.seconds = time.monotonic() - started
        server.stop()
    return run


@dataclass
class Judged:
    """What a chaos run's campaigns showed once the faults were over."""

    histories: int
    replay_failures: dict[str, str]
    executions: int
    calls: int
    twice: dict

    def summary(self, campaigns: int) -> str:
        return (
            f"{campaigns} campaigns sound; {self.histories} histories replayed; "
            f"{self.executions} physical GPU executions for {self.calls} calls"
        )


async def judge_run(
    settings: Settings, run: ChaosRun, judge: Callable[[Client, str], Awaitable[object]]
) -> Judged:
    """Start the server on the run's database, ``judge(client, campaign_id)`` each
    campaign, replay every history on today's workflow code, and count the physical GPU
    executions (``doubled`` excuses a SIGKILL between a result and its store write)."""
    from kernelopt.audit.runs import campaign_histories
    from tests.durability.test_replay import production_workflows, replay

    server = DevServer(settings).start()  # the same SQLite file, to read the results
    try:
        client = await _client(settings)
        histories = []
        for workflow_id in run.campaigns:
            await judge(client, workflow_id)
            histories += [h for _, h in await campaign_histories(client, workflow_id) if h]
        failures = await replay(production_workflows(), histories)
    finally:
        server.stop()
    calls = executions(run.executions)
    return Judged(
        histories=len(histories),
        replay_failures={k: str(v)[:300] for k, v in failures.items()},
        executions=sum(len(v) for v in calls.values()),
        calls=len(calls),
        twice=doubled(run.executions, run.killed_pids()),
    )
