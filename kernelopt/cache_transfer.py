"""GPU workers' compiler caches in a state archive (``kernelopt state export --compiler-caches``).

A large model's Inductor max-autotune compile can outlast a whole GPU loan, and
a fresh machine that starts from empty caches spends its loan compiling again.
Opt-in, the archive therefore carries each GPU worker's Triton and Inductor
caches (``kernelopt.compiler_caches``: the FX-graph cache, autotuning results
and compiled kernels), and the import lays them out for the new machine's host
name and GPUs.

What travels is only what the cache guard has vouched for: a file that a
candidate may have changed in a window no check has closed yet (the snapshot was
taken mid-window, or a gate process died before its check) is left behind, judged
by its change time and its folders' against the window record.  Triton's group
files name their kernels by absolute path, so the import rewrites those that
point into the source worker's folder and drops any that point elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from pydantic import BaseModel, Field

from kernelopt.compiler_caches import (
    CACHE_NAMES,
    WINDOW_NAME,
    Window,
    changed_since,
    read_window,
    worker_cache_dirs,
    worker_of,
)
from kernelopt.log import get_logger

log = get_logger(__name__)

# none; Inductor's benchmark results alone (``autotune_result``: KiBs, the default); everything
CacheScope = Literal["none", "autotune", "all"]
CACHES_PART = "compiler-caches"  # their names in an archive: compiler-caches/<worker>/...
_SPOOL = 8 << 20  # cache files up to this are held in memory while checked
_CHUNK = 1 << 20
_TRIES = 3  # a file re-read when a window opened or closed while it was read

Progress = Callable[[int], None]  # bytes just archived


class CacheWorker(BaseModel):
    """One GPU worker's caches as exported."""

    name: str  # the folder's name at the source: <host>-gpu<id>
    gpu: str
    source_dir: str  # the folder as its worker spelt it (Triton's group files name it)
    files: int = 0
    bytes: int = 0
    left_behind: int = 0  # changed in a window no check had closed: not archived


class CachesInfo(BaseModel):
    """The compiler versions that wrote the caches, and which workers' caches travel."""

    torch_version: str
    triton_version: str
    scope: Literal["autotune", "all"] = "all"
    workers: list[CacheWorker] = Field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(w.bytes for w in self.workers)

    @property
    def files(self) -> int:
        return sum(w.files for w in self.workers)


class Placement(BaseModel):
    """Where one exported worker's caches go on this machine, and why there."""

    source: str  # folder name in the archive
    target: Path | None  # None: not restored (no GPU left for it here)
    note: str = ""


def compiler_versions() -> tuple[str, str]:
    """(torch, triton) installed here, without importing either."""
    return _version("torch"), _version("triton")


def worker_folders(root: Path) -> list[Path]:
    """The worker cache folders under ``root`` (those ``worker_cache_dirs`` lays out)."""
    if not root.is_dir():
        return []
    return [
        p
        for p in sorted(root.iterdir())
        if p.is_dir()
        and not p.is_symlink()
        and worker_of(p.name) is not None
        and any((p / n).is_dir() for n in CACHE_NAMES)
    ]


def autotune_result(cache: str, rel: PurePosixPath) -> bool:
    """Inductor's benchmark results: GEMM/conv choice timings and kernels' best configs.

    A few KiBs that spare a fresh machine of the same GPU and compiler versions
    every benchmark of a max-autotune compile (the compiled code itself is rebuilt).
    """
    return cache == "inductor" and (
        rel.parts[:1] == ("cache",) or rel.name.endswith(".best_config")
    )


def cache_bytes(root: Path, scope: CacheScope = "all") -> int:
    """What the caches under ``root`` hold (within ``scope``), for a progress bar's total."""
    total = 0
    for folder in worker_folders(root):
        for name in CACHE_NAMES:
            for base, subdirs, files in os.walk(folder / name):
                subdirs[:] = [d for d in subdirs if not _bookkeeping(d)]
                rel_dir = PurePosixPath(Path(base).relative_to(folder / name).as_posix())
                for f in files:
                    if scope == "autotune" and not autotune_result(name, rel_dir / f):
                        continue
                    with contextlib.suppress(OSError):
                        total += os.lstat(os.path.join(base, f)).st_size
    return total


def pack_caches(
    tar: tarfile.TarFile,
    root: Path,
    spool_dir: Path,
    add: Callable[[tarfile.TarFile, str, int, str], None],
    progress: Progress | None = None,
    scope: Literal["autotune", "all"] = "all",
) -> CachesInfo:
    """Archive every worker's caches under ``root`` (within ``scope``) that the guard has
    vouched for.

    ``add(tar, name, size, sha256)`` records each archived file (the manifest).
    """
    torch_version, triton_version = compiler_versions()
    info = CachesInfo(torch_version=torch_version, triton_version=triton_version, scope=scope)
    for folder in worker_folders(root):
        host_gpu = worker_of(folder.name)
        assert host_gpu is not None
        worker = CacheWorker(name=folder.name, gpu=host_gpu[1], source_dir=str(folder))
        record = folder / WINDOW_NAME
        for cache in CACHE_NAMES:
            top = folder / cache
            if not top.is_dir() or top.is_symlink():
                continue
            for dirpath, subdirs, files, dirfd in os.fwalk(top, follow_symlinks=False):
                subdirs[:] = [d for d in subdirs if not _bookkeeping(d)]
                rel_dir = Path(dirpath).relative_to(top)
                for filename in sorted(files):
                    if _bookkeeping(filename):
                        continue
                    rel = PurePosixPath(rel_dir.as_posix()) / filename
                    if scope == "autotune" and not autotune_result(cache, rel):
                        continue
                    name = f"{CACHES_PART}/{folder.name}/{cache}/{(rel_dir / filename).as_posix()}"
                    size = _pack_one(
                        tar, name, top, rel_dir, filename, dirfd, record, spool_dir, add
                    )
                    if size is None:
                        worker.left_behind += 1
                        continue
                    worker.files += 1
                    worker.bytes += size
                    if progress is not None:
                        progress(size)
        info.workers.append(worker)
        log.info(
            "compiler caches archived",
            worker=folder.name,
            files=worker.files,
            bytes=worker.bytes,
            left_behind=worker.left_behind,
        )
    return info


def _pack_one(
    tar: tarfile.TarFile,
    name: str,
    top: Path,
    rel_dir: Path,
    filename: str,
    dirfd: int,
    record: Path,
    spool_dir: Path,
    add: Callable[[tarfile.TarFile, str, int, str], None],
) -> int | None:
    """Archive one cache file if no unchecked window can have changed it; its size, or None."""
    for _ in range(_TRIES):
        before = read_window(record)
        try:
            fd = os.open(filename, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
        except OSError:
            return None  # gone, or a link a candidate left: never followed
        with os.fdopen(fd, "rb") as handle:
            first = os.fstat(handle.fileno())
            if not stat.S_ISREG(first.st_mode):
                return None  # a FIFO or device node: nothing a compiler wrote
            with tempfile.SpooledTemporaryFile(max_size=_SPOOL, dir=spool_dir) as spool:
                digest = _hashing_copy(handle, spool)
                last = os.fstat(handle.fileno())
                chain = [*_folder_ctimes(top, rel_dir, dirfd), last.st_ctime_ns]
                after = read_window(record)
                steady = (first.st_size, first.st_ctime_ns) == (last.st_size, last.st_ctime_ns)
                if before != after or not steady:
                    continue  # a window opened or closed, or the file changed, meanwhile
                if _unchecked(after, chain):
                    return None
                size = spool.tell()
                spool.seek(0)
                member = tarfile.TarInfo(name)
                member.size, member.mode, member.mtime = size, 0o600, int(last.st_mtime)
                tar.addfile(member, spool)
                add(tar, name, size, digest)
                return size
    return None


def _unchecked(window: Window | None, chain: Sequence[int]) -> bool:
    """Changed in a window still open (its candidate may be running, or died unchecked)."""
    return window is not None and window.open and changed_since(chain, window.since_ns)


def _folder_ctimes(top: Path, rel_dir: Path, dirfd: int) -> list[int]:
    """Change times of the file's folder (through its descriptor) and those above it below
    ``top``; a folder that is no longer a folder counts as changed now."""
    out = [os.fstat(dirfd).st_ctime_ns] if rel_dir.parts else []
    for parent in list(rel_dir.parents)[:-1]:  # the folders above, below top
        try:
            st = os.lstat(top / parent)
        except OSError:
            out.append(2**63 - 1)
            continue
        out.append(st.st_ctime_ns if stat.S_ISDIR(st.st_mode) else 2**63 - 1)
    return out


def _hashing_copy(source: IO[bytes], target: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: source.read(_CHUNK), b""):
        digest.update(chunk)
        target.write(chunk)
    return digest.hexdigest()


# --- import ------------------------------------------------------------------------------------
def version_mismatch(info: CachesInfo) -> str:
    """Why caches written by ``info``'s compilers must not be used here ("" if they may)."""
    torch_here, triton_here = compiler_versions()
    wrong = [
        f"{name} {there} there, {here} here"
        for name, there, here in (
            ("torch", info.torch_version, torch_here),
            ("triton", info.triton_version, triton_here),
        )
        if there != here
    ]
    return "; ".join(wrong)


def place_workers(
    info: CachesInfo, root: Path, host: str, gpus: Sequence[tuple[str, str]]
) -> list[Placement]:
    """Map each exported worker's caches onto this host's worker for the same GPU.

    ``gpus``: this machine's (index, UUID) pairs in index order.  A GPU id of
    the source that names none of them (a UUID of another machine's GPU, an index
    beyond this machine's count) takes the first GPU here that no other exported
    worker claimed, by position; with no GPU list (no ``nvidia-smi``) ids are kept.
    """
    ids = {i for pair in gpus for i in pair}
    taken: set[str] = set()
    out: list[Placement] = []
    pending: list[CacheWorker] = []
    for worker in info.workers:
        if not gpus or (worker.gpu in ids and _index_of(worker.gpu, gpus) not in taken):
            taken.add(_index_of(worker.gpu, gpus))
            out.append(_placed(worker, root, host, worker.gpu))
        else:
            pending.append(worker)
    free = [index for index, _ in gpus if index not in taken]
    for worker, index in zip(pending, [*free, *[None] * len(pending)], strict=False):
        if index is None:
            out.append(
                Placement(
                    source=worker.name,
                    target=None,
                    note=f"{worker.name}: no GPU left here for GPU {worker.gpu}'s caches; "
                    "not restored",
                )
            )
            continue
        placed = _placed(worker, root, host, index)
        placed.note = (
            f"{worker.name}: GPU {worker.gpu} does not exist here; its caches go to GPU "
            f"{index} (by position)"
        )
        out.append(placed)
    return out


def _index_of(gpu: str, gpus: Sequence[tuple[str, str]]) -> str:
    for index, uuid in gpus:
        if gpu in (index, uuid):
            return index
    return gpu


def _placed(worker: CacheWorker, root: Path, host: str, gpu: str) -> Placement:
    triton, _ = worker_cache_dirs(root, host, gpu)
    return Placement(source=worker.name, target=triton.parent)


def relocate_groups(staged: Path, source_dir: str, target: Path) -> int:
    """Point the Triton group files of a worker's caches, staged at ``staged``, at ``target``
    (where they are about to go); a group naming anything outside the source worker's
    Triton cache is dropped.  Returns how many were dropped."""
    old = f"{source_dir.rstrip('/')}/triton/"
    new = f"{target}/triton/"
    dropped = 0
    for path in sorted((staged / "triton").rglob("__grp__*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            group = json.loads(path.read_text(encoding="utf-8"))
            moved = {}
            for child, where in group["child_paths"].items():
                if not isinstance(where, str) or not where.startswith(old) or "/../" in where:
                    raise ValueError(where)
                moved[child] = new + where[len(old) :]
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            path.unlink()
            dropped += 1
            continue
        path.write_text(json.dumps({**group, "child_paths": moved}), encoding="utf-8")
    return dropped


# --- helpers -----------------------------------------------------------------------------------
def _bookkeeping(name: str) -> bool:
    """Lock files and writers' temporary folders (as the cache guard skips them)."""
    return name.endswith(".lock") or name.startswith("tmp.") or name.startswith(".tmp-")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


__all__ = [
    "CACHES_PART",
    "CacheScope",
    "CacheWorker",
    "CachesInfo",
    "Placement",
    "autotune_result",
    "cache_bytes",
    "compiler_versions",
    "pack_caches",
    "place_workers",
    "relocate_groups",
    "version_mismatch",
    "worker_folders",
]
