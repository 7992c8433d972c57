"""Each GPU worker gets Triton and Inductor caches of its own.

The cache guard (``gates/cache_guard.py``) fails a candidate for any cached
file whose content changed while the candidate's process ran.  That verdict is
only right if nothing else writes those caches meanwhile; with shared
default caches, other workers' compiles (Inductor's benchmark-cache file, a
kernel's ``.best_config``) failed honest candidates (docs/TEAM_NOTES.md,
"Measurements behind the code").  A GPU worker runs one activity at a time and its gate
processes one after another, so with caches of its own the only process that
can write them during a candidate's window is that candidate.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelopt.file_lock import exclusive_lock
from kernelopt.store import write_atomic

CACHE_ENV = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def worker_cache_dirs(root: Path, host: str, gpu: str) -> tuple[Path, Path]:
    """(Triton, Inductor) cache directories of the GPU worker for ``gpu`` on ``host``.

    ``gpu`` is the physical device (an index or a ``GPU-<uuid>`` from
    ``CUDA_VISIBLE_DEVICES``), so two workers on one host never share, and the
    host is in the name in case ``root`` is on a shared file system.
    """
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{host}-gpu{gpu}")
    base = root / name
    return base / "triton", base / "inductor"


def isolate_compiler_caches(root: Path, host: str, gpu: str) -> tuple[Path, Path]:
    """Point this process -- and every process it starts -- at the worker's own caches.

    Set before the worker starts its zygote or any activity: both compilers
    read these variables when they compile, and children inherit them.
    """
    dirs = worker_cache_dirs(root, host, gpu)
    for env, path in zip(CACHE_ENV, dirs, strict=True):
        path.mkdir(parents=True, exist_ok=True)
        os.environ[env] = str(path)
    return dirs


# --- the cache guard's window record ------------------------------------------------------------
# The gates open a window before each candidate process and close it once they have checked
# what it wrote (``gates.cache_guard``).  The record lies beside a worker's two caches, out of
# the sandbox's view (only the caches themselves are bound into it), so a candidate can neither
# read nor remove it; ``kernelopt state export --compiler-caches`` reads it to leave behind
# every file a candidate may have changed and no check has seen yet.
WINDOW_NAME = "guard-window"
CACHE_NAMES = ("triton", "inductor")


@dataclass(frozen=True)
class Window:
    """The last window of a worker's caches: opened (and not yet checked) or closed."""

    generation: int
    open: bool
    since_ns: int  # the record's change time, on the clock that stamps the cache files


def window_file(dirs: Sequence[Path]) -> Path | None:
    """The window record of caches laid out as ``worker_cache_dirs`` does; None otherwise."""
    paths = [Path(d) for d in dirs]
    if len(paths) != 2 or tuple(p.name for p in paths) != CACHE_NAMES:
        return None
    if paths[0].parent != paths[1].parent:
        return None
    return paths[0].parent / WINDOW_NAME


def read_window(path: Path) -> Window | None:
    """The record at ``path``; None when there is none (no window ever opened there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        text = handle.read(64).decode("ascii", "replace").split()
    if len(text) != 2 or text[0] not in ("open", "closed") or not text[1].isdigit():
        # unreadable: judged as a window open since the record last changed (the safe side)
        return Window(generation=-1, open=True, since_ns=st.st_ctime_ns)
    return Window(generation=int(text[1]), open=text[0] == "open", since_ns=st.st_ctime_ns)


def _record_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """The record's lock: guards of other threads and processes open and close too."""
    return exclusive_lock(path.with_name(f"{path.name}.lock"))


def _holders_file(path: Path) -> Path:
    return path.with_name(f"{path.name}.holders")


def _read_holders(path: Path) -> list[str]:
    try:
        return _holders_file(path).read_text("ascii", "replace").split()
    except FileNotFoundError:
        return []


def _alive(holder: str) -> bool:
    """Whether the process that wrote ``holder`` (``PID:TOKEN``) still runs."""
    pid, _, _ = holder.partition(":")
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it exists
    return True


def new_holder() -> str:
    """A name for one guard's window in the record: this process and a fresh token."""
    return f"{os.getpid()}:{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Opened:
    """What ``open_window`` found and left."""

    window: Window  # the record now
    stale: Window | None  # a window whose holders all died unchecked; None if none


def open_window(path: Path, holder: str) -> Opened:
    """Record ``holder``'s window opening now (before its candidate process starts).

    Windows of candidates that run at once (gate children of parallel checks in one
    process, or of several processes) share the record: it opens with the first and
    closes with the last, so its open time covers every change none has checked yet.
    Holders whose process has died are dropped and their window returned as stale.
    """
    with _record_lock(path):
        last = read_window(path)
        holders = _read_holders(path)
        live = [h for h in holders if _alive(h)]
        stale = last if last is not None and last.open and len(live) < len(holders) else None
        if last is not None and last.open and not holders:
            stale = last  # opened by a guard from before holders were recorded
        if last is None or not last.open:
            _write_window(path, f"open {(last.generation if last else 0) + 1}")
        _write_holders(path, [h for h in live if h != holder] + [holder])
        window = read_window(path)
        assert window is not None
        return Opened(window=window, stale=stale)


def close_window(path: Path, holder: str) -> Window:
    """Record ``holder``'s window checked; the record closes when no live holder is left."""
    with _record_lock(path):
        last = read_window(path)
        live = [h for h in _read_holders(path) if h != holder and _alive(h)]
        _write_holders(path, live)
        if not live:
            _write_window(path, f"closed {last.generation if last else 0}")
        window = read_window(path)
        assert window is not None
        return window


def _write_holders(path: Path, holders: list[str]) -> None:
    write_atomic(_holders_file(path), "".join(f"{h}\n" for h in holders).encode("ascii"))


def _write_window(path: Path, text: str) -> None:
    """A new file renamed over the record: its change time is when this was written."""
    write_atomic(path, text.encode("ascii"))


def changed_since(chain: Sequence[int], since_ns: int) -> bool:
    """Whether any of the change times in ``chain`` (a file's and those of its folders
    below the cache root) is at or after ``since_ns``.

    The folders count because renaming one moves whole entries without touching
    their files' own change times.  "At" counts too: the clock ticks coarsely.
    """
    return any(ctime >= since_ns for ctime in chain)


def worker_of(name: str) -> tuple[str, str] | None:
    """(host, GPU id) of a worker cache folder's name, as ``worker_cache_dirs`` spelt them
    (the host with odd characters replaced); None for a folder of another kind."""
    host, sep, gpu = name.rpartition("-gpu")
    if not sep or not host or not gpu:
        return None
    return host, gpu
