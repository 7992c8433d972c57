"""Every process a child started, found through /proc: stopped, resumed and pinned as one.

A turn session (``gates.turns``) must keep the candidate from running while
the baseline is timed.  A process group is not enough: candidate code can
``setsid`` a helper out of it.  Every process it starts stays a descendant of
the process launched for it, though (a turn child is a subreaper, and inside a
sandbox of its own orphans are adopted by the sandbox's init, itself a
descendant), so the tree under that PID is the whole of it.  SIGSTOP cannot be
caught or ignored and stops every thread.  Linux-only (procfs).

Whoever can name the PIDs walks the tree: the parent for a spawned child
(``HostTree``), the zygote for a forked one, whose PIDs are its sandbox's own
(``gates.zygote``).  ``TreeSignaller`` is what a turn session needs of either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Protocol

from kernelopt.errors import InfrastructureError

_PROC = Path("/proc")
_ROUNDS = 10  # a tree still growing after this many passes is stopped as far as it was found
_STOP_WAIT_NS = 50_000_000  # a process not seen stopped by then is in the kernel: go on
_STOPPED = frozenset("TtZX")  # /proc states of a process that runs no more code


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


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    return children


def tree(root: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """``root`` and all its descendants still alive, parents first."""
    children = _children() if children is None else children
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


def stop_tree(root: int, known: list[int], also: tuple[int, ...] = ()) -> list[int]:
    """SIGSTOP ``known`` at once, then every descendant found until the tree stops growing.

    Returns the stopped tree.  A stopped process cannot fork, so after the known
    ones every pass can only find processes started before their stop.  The
    trees under ``also`` are stopped in the same passes but are not returned.
    """
    send(known, signal.SIGSTOP)
    stopped = set(known)
    for _ in range(_ROUNDS):
        children = _children()
        found = [p for r in (root, *also) for p in tree(r, children)]
        new = [p for p in found if p not in stopped]
        if not new:
            break
        send(new, signal.SIGSTOP)
        stopped.update(new)
    wait_stopped(sorted(stopped))
    return [p for p in tree(root) if p in stopped]


def _state(pid: int) -> str:
    """The /proc state letter of ``pid``; ``X`` for one that has gone."""
    try:
        text = Path(_PROC, str(pid), "stat").read_text()
    except OSError:
        return "X"
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0] if fields else "X"


def wait_stopped(pids: list[int], wait_ns: int = _STOP_WAIT_NS) -> bool:
    """Until each of ``pids`` is seen stopped (or gone); False if one still was not by ``wait_ns``.

    ``kill`` returns before a SIGSTOP takes effect: a process that was runnable but not
    running (a loaded CPU) stops only when it is next scheduled, so until then the next
    turn could share the CPU with it.  A process in uninterruptible sleep stops only when
    its system call returns, which the wait does not outlast.
    """
    deadline = time.perf_counter_ns() + wait_ns
    pending = list(pids)
    while True:
        pending = [p for p in pending if _state(p) not in _STOPPED]
        if not pending:
            return True
        if time.perf_counter_ns() > deadline:
            return False
        os.sched_yield()  # the processes to stop may be waiting for this CPU


def strays(parent: int, owned: set[int]) -> list[int]:
    """Children of ``parent`` that are not in ``owned``: orphans it adopted as a subreaper."""
    return [p for p, pp in _parents().items() if pp == parent and p not in owned]


def pin(pids: list[int], cpu: int) -> None:
    """Every thread of ``pids`` onto ``cpu`` (threads started later inherit it)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.scandir(_PROC / str(pid) / "task"):
                with contextlib.suppress(OSError, ValueError):
                    os.sched_setaffinity(int(task.name), {cpu})


class SignalFailed(InfrastructureError):
    """A stop, resume or pin went unacknowledged: the turn session cannot go on."""


class TreeSignaller(Protocol):
    """What a turn session does to one child's whole tree, whoever can name its PIDs."""

    def stop(self) -> int:
        """Stop every process of the tree; ``perf_counter_ns`` when it is known stopped."""
        ...

    def cont(self) -> None:
        """Continue what the last ``stop`` stopped."""
        ...

    def release(self) -> None:
        """Continue the whole tree for good (it finishes alone)."""
        ...

    def pin(self, cpu: int) -> None:
        """Every thread of the tree onto ``cpu``."""
        ...

    def kill(self) -> None:
        """SIGKILL the whole tree."""
        ...


class HostTree:
    """A spawned child's tree, signalled by host PID from this process."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.pids: list[int] = []  # the tree as last stopped

    def stop(self) -> int:
        """The known processes first, then the search: the search counts only if it found any."""
        send(self.pids or [self.root], signal.SIGSTOP)
        t = time.perf_counter_ns()
        before = set(self.pids)
        self.pids = stop_tree(self.root, self.pids or [self.root])
        if before and set(self.pids) - before:  # started processes during its turn
            t = time.perf_counter_ns()
        return t

    def cont(self) -> None:
        send(self.pids or [self.root], signal.SIGCONT)

    def release(self) -> None:
        send(tree(self.root), signal.SIGCONT)

    def pin(self, cpu: int) -> None:
        pin(self.pids or tree(self.root), cpu)

    def kill(self) -> None:
        send(tree(self.root), signal.SIGKILL)
