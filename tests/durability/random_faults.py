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
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from kernelopt.client import connect
from kernelopt.config import Settings
from tests.durability.executions import EXECUTIONS_ENV
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


async def run_chaos(
    settings: Settings,
    logs: Path,
    seed: int,
    kills: int,
    parallel: int = 2,
    gap_s: tuple[float, float] = (0.5, 3.0),
    down_s: tuple[float, float] = (0.2, 3.0),
    finish_timeout_s: float = 300.0,
) -> ChaosRun:
    rng = random.Random(seed)
    run = ChaosRun(seed=seed, executions=logs / "executions.jsonl")
    started = time.monotonic()
    server = DevServer(settings).start()
    cpu_q, gpu_q = queues()
    env = {"KERNELOPT_DOUBLES_DELAY": "0.3", EXECUTIONS_ENV: str(run.executions)}
    # a killed CPU worker's activity is retried after seconds, not production's 30 s
    # (test_cpu_worker_kill checks that bound; here only soundness is at stake)
    cpu_env = {CPU_HEARTBEAT_ENV: CPU_HEARTBEAT_S}
    workers = {
        "cpu": [Worker(settings, "cpu", cpu_q, logs, **cpu_env)],
        "gpu": [Worker(settings, "gpu", gpu_q, logs, **env) for _ in range(2)],
    }
    try:
        for w in [*workers["cpu"], *workers["gpu"]]:
            w.wait_ready()
        client = await _client(settings)
        while len(run.kills) < kills:
            open_ = await _open(client, run.campaigns)
            for _ in range(parallel - len(open_)):
                handle = await submit(client, settings, options(cpu_q, gpu_q))
                run.campaigns.append(handle.id)
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
                fresh = Worker(settings, target, victim.queue, logs, **kind_env)
                workers[target] = [fresh if w is victim else w for w in workers[target]]
        for w in [*workers["cpu"], *workers["gpu"]]:
            w.wait_ready()  # a restart that failed is named here, not as a stuck campaign
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
