"""The next supervised child, started while the current activity still runs.

Every gate activity's child spends seconds importing torch and the gate code
before its first useful step.  A GPU worker runs one activity at a time, so the
worker starts the next activities' processes as soon as the current one has its
own: they import in the background and then wait on their stdin for a job.
Each is the same fresh, isolated process as before -- its own session, killed
with the worker, one job and gone -- started earlier.  Two wait at a time: a
search screens and then gates at once, and one spare started when screening
began was still importing when the gate asked for it; a worker with several
slots keeps two a slot, since its slots start activities side by side.  Only a
GPU worker keeps spares (``enable()``); elsewhere each child starts when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass

from kernelopt.log import get_logger
from kernelopt.pidfile import die_with_parent

PRELOAD_ENV = "KERNELOPT_CHILD_PRELOAD"  # modules a spare imports before its job arrives
log = get_logger(__name__)


@dataclass
class _Spare:
    proc: asyncio.subprocess.Process
    loop: asyncio.AbstractEventLoop
    env: dict[str, str]


POOL = 2  # spares kept waiting for each of the worker's activity slots
_enabled = False
_pool = POOL
_spares: list[_Spare] = []


def enable(slots: int = 1) -> None:
    """Keep ``POOL`` children started ahead for each of the worker's ``slots`` (a GPU worker
    runs that many activities at a time)."""
    global _enabled, _pool
    _enabled = True
    _pool = POOL * max(1, slots)


def disable() -> None:
    """No more spares; the one waiting is killed."""
    global _enabled
    _enabled = False
    while _spares:
        _kill(_spares.pop().proc.pid)


def waiting() -> list[int]:
    """The pids of the spares waiting now, oldest first."""
    return [spare.proc.pid for spare in _spares]


# What an Inductor wrapper imports at its top (seconds after torch): triage and
# re-stitch load one, and importing it into every spare takes that off the critical path.
WRAPPER_RUNTIME = (
    "torch._inductor.select_algorithm",
    "torch._inductor.async_compile",
    "torch._inductor.runtime.triton_heuristics",
)


def preload_for(target: str) -> str:
    """What a spare imports ahead: torch, the runtime of Inductor's wrappers, and the
    module of the activity just started (a campaign mostly runs the same kind of
    activity again)."""
    return ",".join(["torch", *WRAPPER_RUNTIME, job_module(target)])


def job_module(target: str) -> str:
    """The module of an activity's ``module:function`` target."""
    return target.partition(":")[0]


async def spawn(env: dict[str, str], preload: str = "") -> asyncio.subprocess.Process:
    """A child that imports ``preload`` and then runs the job its stdin brings."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "activities.child",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**env, PRELOAD_ENV: preload},
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


async def take(env: dict[str, str]) -> asyncio.subprocess.Process:
    """A started child with exactly ``env``: the oldest spare that matches and lives (the
    one furthest through its imports), else a new one; a spare started for other
    settings (or another event loop) is killed."""
    loop = asyncio.get_running_loop()
    while _spares:
        spare = _spares.pop(0)
        if spare.loop is loop and spare.env == env and spare.proc.returncode is None:
            return spare.proc
        _kill(spare.proc.pid)
    return await spawn(env)


async def replenish(env: dict[str, str], target: str) -> None:
    """Start the next activities' children now, up to the pool ``enable`` set waiting, if
    this worker keeps spares."""
    while _enabled and len(_spares) < _pool:
        try:
            proc = await spawn(env, preload_for(target))
        except OSError as exc:  # only a head start is lost: the next child starts when asked
            log.warning("could not start the next child ahead", error=str(exc))
            return
        _spares.append(_Spare(proc, asyncio.get_running_loop(), dict(env)))


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
