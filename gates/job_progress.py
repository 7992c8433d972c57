"""Progress markers of a gate child process, and the workdir its job writes into.

``gates.child`` runs a job from ``gates.jobs``; the jobs (and the helpers they
use) mark their phases here rather than in ``gates.child``, so the entry point
imports the jobs and nothing below it imports the entry point back.  Markers go
to ``WORKDIR/progress.jsonl``, flushed and fsynced line by line, so that when
the process dies hard the parent still knows which phase it died in.
"""

from __future__ import annotations

import json
import os
import time
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
