"""Compiler caches a candidate could poison, watched while each candidate process runs.

Candidate processes run as the checker's own user, so they can write to the
Triton and Inductor caches that every later process -- the baseline's timing
runs included -- loads compiled kernels from.  A candidate that overwrote the
cached binary or source of a baseline kernel with a slow one would make the
baseline slow and itself look fast.

Each candidate process runs inside a window: ``arm()`` records the inode,
size and change time (``st_ctime_ns``, which a process cannot set back) of
every cache file, ``check()`` names each one that was rewritten, replaced or
removed in between and deletes what is left of it, so the caches regenerate
it from source instead of serving what the candidate left.  New files are
allowed: compiling its own kernels is what a candidate does.  Planting a file
under a key the baseline has not compiled yet is not detected (gates/README).
"""

from __future__ import annotations

import getpass
import os
import re
import tempfile
from pathlib import Path

Stat = tuple[int, int, int]  # inode, size, ctime_ns


def compiler_cache_dirs() -> list[Path]:
    """The Triton and Inductor cache directories this user's processes use."""
    triton_dir = os.environ.get("TRITON_CACHE_DIR") or str(Path.home() / ".triton" / "cache")
    inductor_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not inductor_dir:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        safe = re.sub(r'[\\/:*?"<>|]', "_", user)
        inductor_dir = os.path.join(tempfile.gettempdir(), f"torchinductor_{safe}")
    return [Path(triton_dir), Path(inductor_dir)]


def _bookkeeping(name: str) -> bool:
    """Lock files (reopened with O_TRUNC on every acquire, which moves their change time)
    and writers' temporary directories (``tmp.pid_*``): nothing a kernel is loaded from."""
    return name.endswith(".lock") or name.startswith("tmp.")


def snapshot(dirs: list[Path]) -> dict[str, Stat]:
    """Every cached file below ``dirs`` with its inode, size and change time."""
    out: dict[str, Stat] = {}
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if not _bookkeeping(d)]
            for name in files:
                if _bookkeeping(name):
                    continue
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue  # removed while we walked: not ours to judge
                out[path] = (st.st_ino, st.st_size, st.st_ctime_ns)
    return out


def changed(before: dict[str, Stat], after: dict[str, Stat]) -> list[str]:
    """Files of ``before`` that were rewritten, replaced or removed (new files are fine)."""
    return sorted(path for path, stat in before.items() if after.get(path) != stat)


class CacheGuard:
    """One watch window per candidate process: ``arm()`` before it, ``check()`` after it."""

    def __init__(self, dirs: list[Path] | None = None) -> None:
        self.dirs = dirs if dirs is not None else compiler_cache_dirs()
        self._before: dict[str, Stat] | None = None

    def arm(self) -> None:
        self._before = snapshot(self.dirs)

    def check(self) -> list[str]:
        """Cache files the process changed (deleted now: they regenerate); [] if not armed."""
        if self._before is None:
            return []
        touched = changed(self._before, snapshot(self.dirs))
        self._before = None
        for path in touched:
            Path(path).unlink(missing_ok=True)
        return touched

    def describe(self, path: str) -> str:
        """A cache file's name relative to its cache directory, for verdicts."""
        for top in self.dirs:
            try:
                return f"compiler cache {top.name}/{Path(path).relative_to(top)}"
            except ValueError:
                continue
        return f"compiler cache {path}"
