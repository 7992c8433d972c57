"""Fault injection for the end-to-end GPU runs: a GPU worker killed or frozen mid-activity.

Shared by ``tests/e2e/test_gpu_campaigns.py`` and ``scripts/gpu_e2e.py``; the check that
follows either is that no candidate was gated to completion twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from gates.reaper import children_of
from kernelopt.config import Settings
from kernelopt.local_workers import ensure_local_workers, running


def _tree(root: int) -> list[int]:
    """``root`` and every descendant: supervised children run in sessions of their own."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children_of(pid))
    return out


async def kill_gpu_worker(
    settings: Settings,
    not_before: float,
    fault: dict,
    freeze: bool = False,
    wait_s: float = 60.0,
) -> None:
    """SIGKILL the GPU worker's process group mid-activity, then start a new worker.

    ``freeze``: SIGSTOP the worker and every descendant instead -- a stuck worker that
    stops heartbeating without dying; its activity must move to the new worker once the
    heartbeat timeout passes.  The frozen processes are killed at the end of the run.
    The fault waits up to ``wait_s`` after ``not_before`` for a ``gate_candidate`` child
    to start, then strikes whatever runs; ``fault["gate_under_way"]`` says which.
    """
    while time.monotonic() < not_before:
        await asyncio.sleep(1.0)
    log = settings.home / "workers" / "gpu0.log"
    fault["gate_under_way"] = False
    for _ in range(max(1, round(wait_s / 0.5))):  # wait for a gate to be under way
        text = log.read_text(errors="replace") if log.is_file() else ""
        if "gate_candidate" in text[-400:] and "child started" in text[-400:]:
            fault["gate_under_way"] = True
            break
        await asyncio.sleep(0.5)
    pid = running(settings).get("gpu0")
    if pid is None:
        fault["error"] = "no gpu0 worker to kill"
        return
    tail = log.read_text(errors="replace")[-600:] if log.is_file() else ""
    if freeze:
        frozen = _tree(pid)
        for one in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(one, signal.SIGSTOP)
        (settings.home / "workers" / "gpu0.pid").unlink(missing_ok=True)  # so a new one starts
        fault.update(frozen_pids=frozen)
    else:
        os.killpg(pid, signal.SIGKILL)
    what = "SIGSTOPped (frozen)" if freeze else "SIGKILLed"
    fault.update(
        fault="freeze" if freeze else "kill",
        killed_pid=pid,
        at_s=round(time.monotonic() - not_before, 1),
        log_tail=tail,
    )
    print(f"fault test: {what} GPU worker {pid}", flush=True)
    await asyncio.sleep(3.0)
    fault["restarted"] = ensure_local_workers(settings)
    print(f"fault test: workers now {fault['restarted']}", flush=True)
