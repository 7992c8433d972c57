"""One exclusive lock on a file, held for a short critical section by threads and processes.

``flock(2)`` locks belong to an open file, so each holder opens its own: two threads of
one process exclude each other as two processes do, and a process that dies lets go.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold ``path`` (created if missing, never through a link) locked for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
