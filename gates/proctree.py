"""Every process a child started, found through /proc: stopped, resumed and pinned as one.

A turn session (``gates.turns``) must keep the candidate from running while
the baseline is timed.  A process group is not enough: candidate code can
``setsid`` a helper out of it.  Every process it starts stays a descendant of
the process the parent launched, though (inside a sandbox of its own, orphans
are adopted by the sandbox's init, itself a descendant), so the tree under
that host PID is the whole of it.  SIGSTOP cannot be caught or ignored and
stops every thread.  Linux-only (procfs).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

_PROC = Path("/proc")
_ROUNDS = 10  # a tree still growing after this many passes is stopped as far as it was found


def _parents() -> dict[int, int]:
    """PID -> parent PID of every process visible here."""
    out: dict[int, int] = {}
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
            # the command (field 2) may hold spaces and parentheses: fields after its last ')'
            out[int(entry.name)] = int(text[text.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def tree(root: int) -> list[int]:
    """``root`` and all its descendants still alive, parents first."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def send(pids: list[int], sig: signal.Signals) -> None:
    """``sig`` to each of ``pids``; a process that has gone is skipped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_tree(root: int, known: list[int]) -> list[int]:
    """SIGSTOP ``known`` at once, then every descendant found until the tree stops growing.

    Returns the stopped tree.  A stopped process cannot fork, so after the known
    ones every pass can only find processes started before their stop.
    """
    send(known, signal.SIGSTOP)
    stopped = set(known)
    for _ in range(_ROUNDS):
        new = [p for p in tree(root) if p not in stopped]
        if not new:
            break
        send(new, signal.SIGSTOP)
        stopped.update(new)
    return [p for p in tree(root) if p in stopped]


def pin(pids: list[int], cpu: int) -> None:
    """Every thread of ``pids`` onto ``cpu`` (threads started later inherit it)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.scandir(_PROC / str(pid) / "task"):
                with contextlib.suppress(OSError, ValueError):
                    os.sched_setaffinity(int(task.name), {cpu})
