"""Load: 20 campaigns submitted at once against one GPU worker all finish, nothing lost.

The real dev server (its own SQLite file), one CPU worker and ONE GPU-doubles
worker; 20 campaigns are submitted together, so every GPU activity queues
behind the others.  Every campaign must end like the undisturbed reference
(``assert_sound``), and the CPU worker's resident memory and the server's
database are sampled throughout and printed (issue 25, point 6).  ``slow``:
it runs only when asked for (``-m slow`` or ``KERNELOPT_RUN_SLOW=1``).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from kernelopt.client import connect
from kernelopt.config import Settings
from tests.durability.support import (
    DevServer,
    Worker,
    assert_sound,
    options,
    queues,
    submit,
)
from tests.support.temporal import make_settings

CAMPAIGNS = 20


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _db_mib(settings: Settings) -> float:
    files = settings.server_dir.glob("temporal.db*")
    return sum(f.stat().st_size for f in files) / 2**20


@pytest.mark.slow
async def test_twenty_campaigns_at_once_on_one_gpu_worker(
    reference, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    expr = request.config.getoption("markexpr") or ""
    wanted = os.environ.get("KERNELOPT_RUN_SLOW") == "1" or ("slow" in expr and "not" not in expr)
    if not wanted:
        pytest.skip("slow: run with -m slow or KERNELOPT_RUN_SLOW=1")
    settings = make_settings(tmp_path / "home")
    server = DevServer(settings).start()
    cpu_q, gpu_q = queues()
    cpu = Worker(settings, "cpu", cpu_q, tmp_path)
    gpu = Worker(settings, "gpu", gpu_q, tmp_path, KERNELOPT_DOUBLES_DELAY="0.2")
    samples: list[tuple[float, float, float]] = []
    try:
        cpu.wait_ready(), gpu.wait_ready()
        load_client = await connect(settings, start_embedded=False)
        started = time.monotonic()
        handles = [
            await submit(load_client, settings, options(cpu_q, gpu_q)) for _ in range(CAMPAIGNS)
        ]
        done = asyncio.gather(*(h.result() for h in handles))
        while not done.done():
            samples.append((time.monotonic() - started, _rss_mib(cpu.proc.pid), _db_mib(settings)))
            await asyncio.wait([done], timeout=2.0)
        await done
        took = time.monotonic() - started
        for h in handles:
            await assert_sound(load_client, settings, h.id, reference)
    finally:
        cpu.stop()
        gpu.stop()
        server.stop()
    rss = [s[1] for s in samples]
    db = [s[2] for s in samples]
    print(
        f"\n{CAMPAIGNS} campaigns on one GPU worker in {took:.0f} s; CPU worker RSS "
        f"{rss[0]:.0f} -> max {max(rss):.0f} MiB (last {rss[-1]:.0f}); server DB "
        f"{db[0]:.1f} -> {db[-1]:.1f} MiB"
    )
    assert max(rss) < 1024, "the CPU worker's memory grew past 1 GiB"
