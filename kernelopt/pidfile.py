"""Background processes we start ourselves (the dev server, local workers), by pid file.

A pid file names a process *and its identity*: its start time (field 22 of
``/proc/PID/stat``, in clock ticks since boot, which no process can change)
and its command line.  ``read_live_pid`` returns the pid only while the
process running under it is still the one we started, and only if its command
line is one we launch (``expect``); a stale file whose pid was reused, a
bare pid written by anyone else, or a file forged to point at another process
is refused, so ``kernelopt server stop`` never signals a stranger.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from kernelopt.log import get_logger

_LOG = get_logger(__name__)
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


def process_identity(pid: int) -> tuple[int, list[str]] | None:
    """(start time in clock ticks since boot, argv) of ``pid``; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    try:
        # the command name (field 2) may hold spaces and ")": split after the last ")"
        start = int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None
    argv = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    return start, argv


def write_pid_file(path: Path, pid: int) -> None:
    """Record ``pid`` with its identity (owner-only file)."""
    identity = process_identity(pid)
    start, argv = identity if identity else (None, [])
    data = json.dumps({"pid": pid, "start": start, "argv": argv})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(data)
    os.chmod(path, 0o600)


def read_live_pid(path: Path, expect: Callable[[list[str]], bool] | None = None) -> int | None:
    """The pid in ``path`` if that very process (same start time) still runs.

    ``expect`` must also accept its argv (e.g. "is a kernelopt worker"): a
    planted file copying a stranger's identity from ``/proc`` is refused.
    """
    try:
        record = json.loads(Path(path).read_text())
        pid, start = int(record["pid"]), record["start"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, a bare pid (legacy or planted) or garbage: never trusted
    if not process_alive(pid):
        return None
    now = process_identity(pid)
    # pid and start time name one process for good; the argv recorded right after Popen
    # may still be the forked parent's (exec had not happened yet), so ``expect`` judges
    # the argv the process runs now
    if now is None or start is None or now[0] != int(start):
        _LOG.warning("pid file does not match the process now under that pid", path=str(path))
        return None
    if expect is not None and not expect(now[1]):
        _LOG.warning("pid file names a process we do not start", path=str(path), argv=now[1][:4])
        return None
    return pid
