"""Progress markers of a gate child process, and the workdir its job writes into.

``gates.child`` runs a job from ``gates.jobs``; the jobs (and the helpers they
use) mark their phases here rather than in ``gates.child``, so the entry point
imports the jobs and nothing below it imports the entry point back.  Markers go
to ``WORKDIR/progress.jsonl``, flushed and fsynced line by line, so that when
the process dies hard the parent still knows which phase it died in, and while
it runs the parent can tell a child that stopped marking (``StallWatch``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

_progress_path: Path | None = None
_phase = "start"


def record_to(workdir: Path) -> None:
    """From now on, markers go to ``workdir/progress.jsonl`` (the child's own workdir)."""
    global _progress_path
    _progress_path = workdir / "progress.jsonl"


def mark(phase: str, **detail: object) -> None:
    """Record that the child entered ``phase`` (durable before the phase runs)."""
    global _phase
    _phase = phase
    if _progress_path is None:
        return
    line = json.dumps({"phase": phase, "t": time.time(), **detail}, default=str)
    with open(_progress_path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def job_file(name: str) -> Path:
    """A file in this child's own workdir (staged into a sandboxed zygote's view, and back)."""
    if _progress_path is None:
        return Path(name)
    return _progress_path.parent / name


def current_phase() -> str:
    return _phase


# --------------------------------------------------------------------------- parent side

_POLL_S = 0.05  # how often a parent looks at a child that may stall


class StallWatch:
    """Whether a running child has stopped marking progress for ``stall_s`` (parent side).

    A job that marks progress as it goes (the screen job: one mark per
    candidate) can be ended when it stops, so one hung candidate costs
    ``stall_s``, not the whole job's budget.  ``workdir`` is where the child
    writes its marks (its stage, when it forks from a sandboxed zygote).
    """

    def __init__(self, workdir: Path, stall_s: float | None) -> None:
        self.path = Path(workdir) / "progress.jsonl"
        self.stall_s = stall_s
        self._size = 0
        self._since = time.monotonic()

    def stalled(self) -> bool:
        if self.stall_s is None:
            return False
        try:
            size = self.path.stat().st_size
        except OSError:
            size = 0
        now = time.monotonic()
        if size != self._size:
            self._size, self._since = size, now
            return False
        return now - self._since > self.stall_s


def wait_for(
    poll: Callable[[float], int | None], timeout_s: float, watch: StallWatch
) -> tuple[int | None, str]:
    """Wait for a child: ``(code, "")`` when it exited, ``(None, "timeout" | "stall")`` when not.

    ``poll(seconds)`` waits at most that long and gives the exit code, or None
    while the child runs.  Without a stall limit it is called once.
    """
    deadline = time.monotonic() + timeout_s
    step = timeout_s if watch.stall_s is None else _POLL_S
    while True:
        code = poll(max(0.0, min(step, deadline - time.monotonic())))
        if code is not None:
            return code, ""
        if time.monotonic() >= deadline:
            return None, "timeout"
        if watch.stalled():
            return None, "stall"
