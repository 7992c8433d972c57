"""A supervised-child target that works a while and claims it took no time at all."""

from __future__ import annotations

import time

from kernelopt.contracts.base import DeviceTimed, Frozen
from kernelopt.store import ArtifactStore


class NapIn(Frozen):
    seconds: float


class NapOut(DeviceTimed):
    napped: float


def nap(inp: NapIn, store: ArtifactStore) -> NapOut:
    time.sleep(inp.seconds)
    return NapOut(napped=inp.seconds, device_seconds=0.0)


def nap_then_fail(inp: NapIn, store: ArtifactStore) -> NapOut:
    """A step that works a while and then fails, as a compile Inductor refuses does."""
    time.sleep(inp.seconds)
    raise RuntimeError(f"failed after {inp.seconds} s")


class StagedOut(Frozen):
    stage_seconds: dict[str, float]


def staged(inp: NapIn, store: ArtifactStore) -> StagedOut:
    time.sleep(inp.seconds)
    return StagedOut(stage_seconds={"work": inp.seconds})


class LeftoverIn(Frozen):
    marker: str  # a file an atexit hook would write


class LeftoverOut(Frozen):
    daemon_pid: int
    stage_seconds: dict[str, float]


def leaves_a_daemon(inp: LeftoverIn, store: ArtifactStore) -> LeftoverOut:
    """Like a process whose Inductor compile pool is still up: a helper holding stderr
    open, and teardown work registered for interpreter exit."""
    import atexit
    import subprocess
    import sys
    from pathlib import Path

    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    atexit.register(lambda: Path(inp.marker).write_text("teardown ran"))
    return LeftoverOut(daemon_pid=daemon.pid, stage_seconds={"work": 0.0})


class WhoOut(Frozen):
    pid: int
    preloaded: str  # what the process imported before its job arrived
    resume: dict | None
    wrapper_runtime: bool = False  # Inductor's wrapper runtime already imported


def whoami(inp: NapIn, store: ArtifactStore) -> WhoOut:
    import os
    import sys

    from activities.spare_child import PRELOAD_ENV
    from kernelopt.checkpoint import resume_detail

    return WhoOut(
        pid=os.getpid(),
        preloaded=os.environ.get(PRELOAD_ENV, ""),
        resume=resume_detail(),
        wrapper_runtime="torch._inductor.async_compile" in sys.modules,
    )


class SpanOut(Frozen):
    started: float  # wall clock, comparable across processes
    ended: float


def span(inp: NapIn, store: ArtifactStore) -> SpanOut:
    """When the job's own work ran: inside whatever GPU lease its supervisor asked for."""
    started = time.time()
    time.sleep(inp.seconds)
    return SpanOut(started=started, ended=time.time())
