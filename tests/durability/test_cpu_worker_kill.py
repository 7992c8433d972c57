"""A SIGKILLed CPU worker costs a campaign about one CPU heartbeat timeout, not ten minutes.

Issue 25: CPU activities sent no heartbeats, so a CPU worker killed during
segment or summarize stalled its campaign for the 10-minute start-to-close
timeout.  Here the real dev server, a real CPU worker process and the GPU
doubles run a campaign whose segmentation and report rendering are slowed to a
few seconds; the CPU worker is SIGKILLed in the middle of each and restarted at
once.  The campaign must end like an undisturbed one, and each kill may cost it
at most one heartbeat timeout plus 20 s for the restart and the retry
backoff: the time from when the killed body would have ended to when the
retry's body did.  The test worker's CPU heartbeat timeout is a few seconds
(``tests/support/short_heartbeats.py``), so the bound is far below the
start-to-close timeout; with production's 30 s it stays inside issue 25's minute,
and ``test_cpu_heartbeats.py`` checks that production's is at most a minute.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from temporalio.client import Client

from kernelopt.config import Settings
from tests.durability.slow_cpu import MARKS_ENV, SLOW_ENV
from tests.durability.support import (
    Worker,
    assert_sound,
    options,
    queues,
    submit,
    wait_until,
)
from tests.support.short_heartbeats import CPU_HEARTBEAT_ENV

BODY_S = 2.5  # each slowed body; the kill lands ~0.75 s into it
KILL_AFTER_S = 0.75
CPU_HEARTBEAT_S = 3.0  # the test workers' CPU heartbeat timeout (production: 30 s)
MAX_STALL_S = CPU_HEARTBEAT_S + 20.0  # + restart, retry backoff, a loaded machine


def _bodies(marks: Path) -> list[dict]:
    path = marks / "cpu_bodies.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _first(marks: Path, name: str, event: str, pid: int) -> dict | None:
    return next(
        (
            r
            for r in _bodies(marks)
            if r["activity"] == name and r["event"] == event and r["pid"] == pid
        ),
        None,
    )


async def test_cpu_worker_killed_in_segment_and_in_report_writing(
    client: Client, temporal_settings: Settings, reference, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {
        SLOW_ENV: f"segment={BODY_S},write_report={BODY_S}",
        MARKS_ENV: str(marks),
        CPU_HEARTBEAT_ENV: str(CPU_HEARTBEAT_S),
    }
    cpu_q, gpu_q = queues()
    cpu = Worker(temporal_settings, "cpu", cpu_q, tmp_path, **env)
    gpu = Worker(temporal_settings, "gpu", gpu_q, tmp_path, KERNELOPT_DOUBLES_DELAY="0.05")
    stalls: dict[str, float] = {}
    try:
        cpu.wait_ready(), gpu.wait_ready()
        handle = await submit(client, temporal_settings, options(cpu_q, gpu_q))
        for name in ("segment", "write_report"):
            victim = cpu.proc.pid
            await wait_until(
                lambda n=name, p=victim: _first(marks, n, "start", p), 120, what=f"{name} body"
            )
            await asyncio.sleep(KILL_AFTER_S)
            killed = _first(marks, name, "start", victim)
            cpu.kill()  # SIGKILL in the middle of the body
            assert _first(marks, name, "end", victim) is None, "the kill came too late"
            cpu = Worker(temporal_settings, "cpu", cpu_q, tmp_path, **env).wait_ready()
            await wait_until(
                lambda n=name, p=cpu.proc.pid: _first(marks, n, "end", p),
                MAX_STALL_S + 2 * BODY_S + 30,
                every=0.25,
                what=f"the retried {name}",
            )
            retried = _first(marks, name, "end", cpu.proc.pid)
            stalls[name] = retried["t"] - (killed["t"] + BODY_S)
        started = time.monotonic()
        outcome, _ = await asyncio.wait_for(
            assert_sound(client, temporal_settings, handle.id, reference), 120
        )
        print(
            f"stall per CPU-worker kill: {stalls}; campaign closed {time.monotonic() - started:.1f} s later"
        )
    finally:
        cpu.stop()
        gpu.stop()
    assert outcome.report is not None, "the report was written by the retried attempt"
    for name, stall in stalls.items():
        assert stall < MAX_STALL_S, f"a CPU worker killed during {name} stalled {stall:.0f} s"
