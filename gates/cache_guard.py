"""Compiler caches a candidate could poison, watched while each candidate process runs.

Candidate processes run as the checker's own user, so they can write to the
Triton and Inductor caches that every later process -- the baseline's timing
runs included -- loads compiled kernels from.  A candidate that overwrote the
cached binary or source of a baseline kernel with a slow one would make the
baseline slow and itself look fast.

Each candidate process runs inside a window.  ``arm()`` records the inode,
size and change time (``st_ctime_ns``, which a process cannot set back) of
every cache file, and a content digest of each file it has not seen in that
state before.  ``check()`` looks again: a file whose state moved is hashed, and
if its content differs it was poisoned -- it is named and deleted, so the
cache regenerates it from source instead of serving what the candidate left.
A file rewritten with the same bytes (two processes compiling the same kernel
at once) is not a change; neither is a removed file (it regenerates) nor a new
one (compiling its own kernels is what a candidate does), except a link (no compiler
makes one; a link to a folder hides the files behind it from the walk, which then
read as removed) and a new Inductor timings file (dropped).  Files above
``HASH_LIMIT`` are judged by their state alone.  Autotuning records
(``AUTOTUNE_RECORDS``, and Inductor's max-autotune timings) are dropped but blame
no one: a paired timing child re-tunes the trusted baseline and rewrites them
itself, a candidate that compiles with max-autotune rewrites the timings, and a
dropped record re-tunes in the next process's warm-up or compile.  Planting a file under a key
the baseline has not compiled yet is not detected (gates/README).

A GPU worker's caches also carry a window record (``kernelopt.compiler_caches``):
``arm()`` marks a window open before the candidate starts and ``check()`` marks it
closed once judged, so ``kernelopt state export --compiler-caches`` leaves behind
whatever a candidate changed in a window no check has seen -- a snapshot taken
mid-window, or a gate process killed before its check.  ``arm()`` finding a window
left open by a process that died drops every entry changed since it opened, for the
same reason.  Candidates checked at once (threads sharing a guard, or guards of several
processes on one worker's caches) each get their own window in one shared record.  A
file rewritten while windows overlap is dropped by the first check that sees it and
blamed on that check's candidate, which need not be the one that wrote it: with one
activity per GPU worker (the default) windows never overlap.
"""

from __future__ import annotations

import errno
import getpass
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gates.zygote_client import SOCKET_ENV, ServiceError, request_digests
from kernelopt.compiler_caches import (
    changed_since,
    close_window,
    new_holder,
    open_window,
    window_file,
)

Stat = tuple[int, int, int]  # inode, size, ctime_ns
HASH_LIMIT = 16 * 2**20  # cubins and kernel sources are KBs; bigger files: state only
# which launch configuration a tuned kernel uses (Inductor's runtime autotuner, Triton's
# ``autotune(cache_results=True)``): a choice among the kernel's own configs, never code
AUTOTUNE_RECORDS = (".best_config", ".autotune.json")
# Inductor's max-autotune timings (``PersistentCache``): one JSON file per GPU model, named
# by a hash under ``<inductor cache>/cache/``, rewritten whole by every compile that tunes
_TIMINGS_FILE = re.compile(r"[0-9a-f]{64}")


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


def file_state(st: os.stat_result) -> Stat:
    """What a file's "state" is to the guard and the worker's memo alike."""
    return (st.st_ino, st.st_size, st.st_ctime_ns)


def snapshot(dirs: list[Path]) -> dict[str, Stat]:
    """Every cached file below ``dirs`` with its inode, size and change time."""
    out: dict[str, Stat] = {}
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if not _bookkeeping(d)]
            # a link to a folder is listed, never followed: an entry to judge like a file
            links = [d for d in subdirs if os.path.islink(os.path.join(root, d))]
            for name in [*files, *links]:
                if _bookkeeping(name):
                    continue
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue  # removed while we walked: not ours to judge
                out[path] = file_state(st)
    return out


def content_digest(path: str, size: int) -> str | None:
    """BLAKE2b of the file, "" above ``HASH_LIMIT`` (state only), None if it is gone.

    Opened without following a link and without blocking: a candidate can
    leave a FIFO (a plain read would hang the next gate) or a symlink to a
    file of its own (judged by where it points) in the cache.
    """
    if size > HASH_LIMIT:
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None
        try:
            return f"symlink:{os.readlink(path)}"
        except OSError:
            return None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            return f"special:{stat.S_IFMT(mode):o}"
        # bounded: a file may grow while we read it
        return hashlib.blake2b(handle.read(HASH_LIMIT + 1), digest_size=16).hexdigest()


class DigestMemo:
    """Content digests of cache-file states, hashed once per worker (or per gate process).

    Lives in a process that runs no candidate code (the GPU worker, which serves it on
    its socket, or a gate process without a worker: ``process_memo``), and only ever
    hashes files itself: a client can ask, never tell.  A state is
    (inode, size, change time); a file changed within ``SETTLE_S`` of hashing
    is not remembered, because change times tick coarsely and a second write
    in the same tick would keep the state but not the bytes.  Only regular
    files under the compiler caches are hashed (the socket is reachable by
    any process of the user: it must not read ``/dev/zero`` or lend itself
    as an oracle for other files); ``any_path`` lifts that for a process's own memo,
    which answers no one else.
    """

    SETTLE_S = 2.0
    LIMIT = 1_000_000  # states remembered before starting over (~200 MB)

    def __init__(self, dirs: list[Path] | None = None, *, any_path: bool = False) -> None:
        self.dirs = [os.path.abspath(d) for d in (dirs or compiler_cache_dirs())]
        self.any_path = any_path
        self._memo: dict[tuple[str, int, int, int], str | None] = {}
        self._lock = threading.Lock()
        self.hashed = 0

    def _in_state(self, path: str, state: tuple[int, int, int]) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and file_state(st) == state

    def digest(self, path: str, state: tuple[int, int, int]) -> str | None:
        """The digest of ``path`` in ``state``; None if it is not there in that state."""
        key = (path, *state)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        path = os.path.abspath(path)
        if not self.any_path and not any(os.path.commonpath([path, d]) == d for d in self.dirs):
            return None
        if not self._in_state(path, state):
            return None
        digest = content_digest(path, state[1])
        self.hashed += 1
        if not self._in_state(path, state):
            return None  # changed while we read it: not the state asked about
        if time.time_ns() - state[2] > self.SETTLE_S * 1e9:
            with self._lock:
                if len(self._memo) >= self.LIMIT:
                    self._memo.clear()
                self._memo[key] = digest
        return digest


def local_digests(items: list[tuple[str, Stat]]) -> list[str | None]:
    """Digests from this process's own memo (no worker service, or it failed).

    A guard arms before every gate child and digests every cache file it has not seen in
    that state; without the memo each guard (one per reference bundle) hashed the whole
    caches again, a cost that grows with them.  The process runs no candidate code, so
    its memo is as trusted as the worker's.
    """
    memo = process_memo()
    return [
        digest
        if (digest := memo.digest(path, state)) is not None
        else content_digest(path, state[1])
        for path, state in items
    ]


_PROCESS_MEMO: list[DigestMemo] = []
_PROCESS_MEMO_LOCK = threading.Lock()


def process_memo() -> DigestMemo:
    """This process's own memo of cache-file digests (``local_digests``), made on first use."""
    with _PROCESS_MEMO_LOCK:
        if not _PROCESS_MEMO:
            _PROCESS_MEMO.append(DigestMemo(any_path=True))
        return _PROCESS_MEMO[0]


def worker_digests(items: list[tuple[str, Stat]]) -> list[str | None]:
    """Digests from the GPU worker's memo (``gates.zygote_service``), else hashed here.

    A suite run's caches fill with autotuning kernels, and every gate process
    would hash them all again, seconds per gate activity.  The worker process hashes each
    file state once and remembers it.
    """
    path = os.environ.get(SOCKET_ENV)
    if path and items:
        try:
            served = request_digests(path, items)
        except ServiceError:
            return local_digests(items)
        # None: the worker would not vouch (the file moved on since our snapshot, or lies
        # outside its caches); hash those here, exactly as without the worker
        return [
            digest if digest is not None else content_digest(p, state[1])
            for (p, state), digest in zip(items, served, strict=True)
        ]
    return local_digests(items)


class CacheGuard:
    """One watch window per candidate process: ``arm()`` before it, ``check()`` after it.

    ``digests`` supplies the content digests ``arm()`` records (default: the
    worker's memo, which hashes files itself and answers no one's claims);
    ``check()`` hashes what changed in the window itself.
    """

    def __init__(
        self,
        dirs: list[Path] | None = None,
        digests: Callable[[list[tuple[str, Stat]]], list[str | None]] | None = None,
    ) -> None:
        self.dirs = dirs if dirs is not None else compiler_cache_dirs()
        self.digests = digests or worker_digests
        self.seconds = 0.0  # spent arming and checking, for the gate's stage timings
        self._known: dict[str, tuple[Stat, str | None]] = {}  # path -> (state, digest then)
        self.retuned: list[str] = []  # autotuning records rewritten and dropped, unblamed
        self.window = window_file(self.dirs)  # None: caches not laid out as a worker's
        self.stale: list[str] = []  # dropped because a window before ours was never checked
        # one window per thread: parallel checks sharing a reference bundle each judge
        # their own candidate process (``before``: its snapshot; ``holder``: its record name)
        self._mine = threading.local()
        self._lock = threading.Lock()  # ``_known``, ``retuned`` and ``stale``

    def arm(self) -> None:
        started = time.monotonic()
        holder = getattr(self._mine, "holder", None)
        if self.window is not None and holder is None:  # else: armed again before a check
            holder = new_holder()
            opened = open_window(self.window, holder)  # before the snapshot and the start
            if opened.stale is not None:  # a window whose gate died unchecked
                self._drop_changed_since(opened.stale.since_ns)
            self._mine.holder = holder
        before = snapshot(self.dirs)
        with self._lock:
            new = [(p, st) for p, st in before.items() if self._known.get(p, (None,))[0] != st]
        digests = self.digests(new)
        with self._lock:
            for (path, state), digest in zip(new, digests, strict=True):
                self._known[path] = (state, digest)
        self._mine.before = before
        self.seconds += time.monotonic() - started

    def check(self) -> list[str]:
        """Cache files whose content the process changed (deleted now); [] if not armed.

        Rewritten autotuning records are deleted too but not returned; they are
        listed in ``retuned``.
        """
        started = time.monotonic()
        try:
            return self._check()
        finally:
            self.seconds += time.monotonic() - started

    def _check(self) -> list[str]:
        before = getattr(self._mine, "before", None)
        self._mine.before = None  # one check per window
        if before is None:
            return []
        after = snapshot(self.dirs)
        touched = []
        for path, state in before.items():
            now = after.get(path)
            if now is None or now == state:
                continue  # removed (regenerates) or untouched
            with self._lock:
                was = self._known.get(path, (state, None))[1]
            digest = content_digest(path, now[1])
            if was is None or digest is None or digest == "" or digest != was:
                touched.append(path)
            else:
                with self._lock:
                    self._known[path] = (now, digest)  # same bytes written again: benign
        for path in sorted(set(after) - set(before)):
            if os.path.islink(path):  # no compiler makes links: one can hide a rewritten entry
                touched.append(path)
            elif self.tuning_record(path) and not path.endswith(AUTOTUNE_RECORDS):
                touched.append(path)  # planted timings would steer the next compile: dropped
        retuned = [p for p in touched if self.tuning_record(p) and not os.path.islink(p)]
        for path in retuned:  # a record alone: the kernel beside it stays
            Path(path).unlink(missing_ok=True)
            with self._lock:
                self._known.pop(path, None)
                self.retuned.append(path)
        blamed = sorted(set(touched) - set(retuned))
        for path in blamed:
            self._drop_entry(Path(path))
        holder, self._mine.holder = getattr(self._mine, "holder", None), None
        if self.window is not None and holder is not None:
            close_window(self.window, holder)
        return blamed

    def _drop_changed_since(self, since_ns: int) -> None:
        """Drop every entry a window left open (its gate process died before ``check()``)
        may have changed: the file, or a folder above it below a cache root, changed since."""
        for top in self.dirs:
            for root, subdirs, files in os.walk(top):
                subdirs[:] = [d for d in subdirs if not _bookkeeping(d)]
                chain = _folder_ctimes(Path(top), Path(root))
                for name in files:
                    if _bookkeeping(name):
                        continue
                    path = Path(root) / name
                    try:
                        ctime = os.lstat(path).st_ctime_ns
                    except OSError:
                        continue
                    if changed_since([*chain, ctime], since_ns):
                        with self._lock:
                            self.stale.append(str(path))
                        self._drop_entry(path)

    def _drop_entry(self, path: Path) -> None:
        """Delete the cache entry holding ``path``: its whole directory, below a cache root.

        A Triton cache entry is a directory of files that belong together (the
        metadata names the cubin beside it): deleting one file left the entry
        half there, and every later compile of that kernel failed with
        ``KeyError: 'cubin'`` instead of regenerating it.
        """
        parent = path.parent
        if any(parent == top or parent.parent == parent for top in self.dirs):
            path.unlink(missing_ok=True)
            with self._lock:
                self._known.pop(str(path), None)
            return
        shutil.rmtree(parent, ignore_errors=True)
        with self._lock:
            for known in [k for k in self._known if Path(k).parent == parent]:
                self._known.pop(known, None)

    def tuning_record(self, path: str) -> bool:
        """A record of which choice a tuner picked, never code: a kernel's launch config, or
        Inductor's max-autotune timings, which a candidate that compiles with max-autotune
        rewrites whole."""
        if path.endswith(AUTOTUNE_RECORDS):
            return True
        where = Path(path)
        return (
            _TIMINGS_FILE.fullmatch(where.name) is not None
            and where.parent.name == "cache"
            and where.parent.parent in self.dirs
        )

    def describe(self, path: str) -> str:
        """A cache file's name relative to its cache directory, for verdicts."""
        for top in self.dirs:
            try:
                return f"compiler cache {top.name}/{Path(path).relative_to(top)}"
            except ValueError:
                continue
        return f"compiler cache {path}"


def _folder_ctimes(top: Path, folder: Path) -> list[int]:
    """Change times of ``folder`` and the folders between it and ``top`` (``top`` not included:
    every new entry changes it)."""
    out = []
    while folder != top and top in folder.parents:
        try:
            out.append(os.lstat(folder).st_ctime_ns)
        except OSError:
            out.append(time.time_ns())  # gone meanwhile: judged changed
        folder = folder.parent
    return out
