"""Background processes we start ourselves (the dev server, local workers), by pid file."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux; elsewhere a no-op),
    so a killed worker leaves no child running on its GPU."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs; reaps it if it is our own exited child (a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def read_live_pid(path: Path) -> int | None:
    """The pid in ``path`` if that process is alive; None for a missing or stale file."""
    try:
        pid = int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid) else None
