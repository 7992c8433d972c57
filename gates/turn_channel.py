"""The line protocol between a turn session's parent and its two children (``gates.turns``).

Two FIFOs in each child's own workdir, made by the parent before the child
starts: the parent writes one-line commands (``start``, ``prep``, ``probe``,
``turn``, ``end``, each with a sequence number) into ``COMMANDS`` and reads
the child's answers from ``REPLIES``.  FIFOs, because a sandboxed child sees
its workdir through a bind mount (the same inode on both sides) while no
descriptor of the parent's reaches it (bubblewrap starts it with its own).
The parent opens both ends read-write, so neither open ever waits for the
other side and a child that dies leaves no writer-less pipe behind.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

COMMANDS = "turn_commands"  # parent -> child
REPLIES = "turn_replies"  # child -> parent
_MAX_LINE = 256  # longer "lines" are not ours: dropped
_POLL_S = 0.05  # how often a waiting parent checks that the child still runs


def make_fifos(workdir: Path) -> None:
    """Fresh FIFOs in ``workdir`` (stale ones from an earlier run removed first)."""
    for name in (COMMANDS, REPLIES):
        path = Path(workdir) / name
        path.unlink(missing_ok=True)
        os.mkfifo(path, 0o600)


class LineReader:
    """Lines from a non-blocking descriptor, each awaited with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    def _fill(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return
                self._buffer += chunk
                if len(self._buffer) > 1 << 20:  # a flood is not an answer
                    self._buffer = self._buffer[-_MAX_LINE:]

    def drain(self) -> None:
        """Drop whatever is waiting: a line written outside the command it answers is stale."""
        self._fill()
        self._buffer = b""

    def line(self, deadline: float, alive: Callable[[], bool]) -> str | None:
        """The next line, or None once ``deadline`` (monotonic) passed or ``alive()`` is False."""
        while True:
            while b"\n" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\n", 1)
                if len(raw) <= _MAX_LINE:
                    return raw.decode(errors="replace").strip()
            left = deadline - time.monotonic()
            if left <= 0 or not alive():
                return None
            readable, _, _ = select.select([self.fd], [], [], min(left, _POLL_S))
            if readable:
                self._fill()
