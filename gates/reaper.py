"""Processes a candidate leaves behind are killed before anything else is measured.

A candidate can fork, ``setsid`` and outlive its job: killing the job's
process group misses such a daemon, and a daemon that keeps the GPU (or a
CPU core) busy while the baseline is timed makes any candidate look fast.
The process that starts gate jobs therefore registers as a *child
subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): orphaned descendants of its
jobs become its own children, and after each job every child that is not a
running job is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterable
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); False where the kernel does not offer it."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return False
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children_of(pid: int) -> list[int]:
    """Live children of ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command name (field 2) may contain spaces: split after its ")"
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(stat.parent.name))
    return out


def reap_orphans(keep: Iterable[int] = ()) -> list[int]:
    """SIGKILL and reap every child of this process not in ``keep``; their pids."""
    keep = set(keep)
    killed: list[int] = []
    for _ in range(8):  # a killed daemon's own children are adopted next: sweep again
        strays = [p for p in children_of(os.getpid()) if p not in keep and p not in killed]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        for pid in strays:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
    return killed
