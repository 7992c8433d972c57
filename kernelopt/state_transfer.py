"""Moving a campaign's state between machines: ``kernelopt state export`` / ``state import``.

A GPU loan ends (or its machine is lost) and a fresh machine takes over: what
the campaign needs is the embedded server's SQLite database and the files the
workers keep under ``KERNELOPT_HOME`` -- the artifact store, the GPU result
index (so a retried call finds its finished result instead of running again),
the shared experience memory and the reply folder.  Caches a new machine
rebuilds (compiled code) and per-machine bookkeeping (pid files, worker and
server logs) stay behind.  The GPU workers' autotuning results do travel
(``kernelopt.cache_transfer``): a large model's max-autotune compile spends
most of its time benchmarking choices, and they spare the next machine that;
opt-in (``compiler_caches="all"``) the whole compiler caches travel too.

The database is copied with SQLite's online backup API, never as a file: a
copy of a file the server is writing can be torn, while a backup is one
consistent transaction boundary -- what the server would find after a crash at
that instant, which Temporal recovers from.  So export works on a running
server (a periodic snapshot during a preemptible loan; the dev server's writes
wait while it is read), a stopped one, and the database a killed server left
behind (opening it recovers a hot journal, as the server's next start would).
The database goes first and the store last: every artifact or result the
snapshot references was written before it, so the archive holds it.

An archive is one gzip'd tar: the files under their home-relative paths and a
``MANIFEST.json`` (``StateManifest``: versions, sizes, sha256 digests).  Import
checks every digest in a staging directory before anything in the home is
replaced, writes owner-only files (the store's policy) and records the move in
the store's journal (``kernelopt.audit.moves``) so the audit shows it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import socket
import sqlite3
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelopt.audit.moves import StateMove, record_move
from kernelopt.cache_transfer import (
    CACHES_PART,
    CacheScope,
    CachesInfo,
    Placement,
    cache_bytes,
    pack_caches,
    place_workers,
    relocate_groups,
    version_mismatch,
    worker_folders,
)
from kernelopt.code_version import code_fingerprint
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from kernelopt.gpu_info import smi_query
from kernelopt.log import get_logger
from kernelopt.store import dir_mode, file_digest, file_mode, open_store, private_dir
from kernelopt.temporal_server import EmbeddedServer, temporal_binary

log = get_logger(__name__)

FORMAT = 1
MANIFEST_NAME = "MANIFEST.json"
DB_NAME = "server/temporal.db"
# what a campaign needs besides the database, in the order they are archived: the store
# last, so everything the result index names was written before it is copied; the
# regeneration digests too, or a resumed search compiles the whole model again to learn
# what its own code is
FILE_PARTS: tuple[str, ...] = ("results", "memory", "llm", "regen_cache", "artifacts")
_CHUNK = 1 << 20

ServerState = Literal["running", "stopped", "lost", "external"]
# (phase, bytes just done, the phase's total): 0 bytes done announces a phase and its total
PhaseProgress = Callable[[str, int, int], None]


class StateTransferError(KernelOptError):
    """An export or import that cannot go ahead, with the reason and what to do."""


class ManifestFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str  # relative to KERNELOPT_HOME, '/'-separated
    size: int
    sha256: str


class StateManifest(BaseModel):
    """What an archive holds and where it came from; checked in full before an import."""

    format: int = FORMAT
    kind: Literal["full", "store-only"]
    created_at: str
    source: str  # host:home
    server: ServerState  # how the source server was when exported
    last_write_at: str  # newest write to the source database (or store): when it stopped
    kernelopt_version: str
    temporalio_version: str
    temporal_cli_version: str
    code: str  # kernelopt.code_version fingerprint of the exporting code
    files: list[ManifestFile] = Field(default_factory=list)
    # files the exporter left behind because its caller regenerates them (``leave_out``)
    left_out: list[str] = Field(default_factory=list)
    # the GPU workers' compiler caches, when exported with them (their files are in ``files``)
    compiler_caches: CachesInfo | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


class PartSummary(BaseModel):
    part: str
    files: int
    bytes: int


class TransferReport(BaseModel):
    """What an export wrote or an import restored, for the CLI to print."""

    archive: Path
    archive_sha256: str
    manifest: StateManifest
    parts: list[PartSummary]
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# --- export ------------------------------------------------------------------------------------
def export_state(
    settings: Settings,
    archive: Path,
    store_only: bool = False,
    leave_out: Iterable[str] = (),
    *,
    compiler_caches: CacheScope = "autotune",
    progress: PhaseProgress | None = None,
) -> TransferReport:
    """Write ``archive`` from ``settings.home``: the database (unless ``store_only``) and files.

    ``leave_out``: home-relative paths (``artifacts/ab/ab12...``) the caller will
    regenerate after the import (tensors drawn from a problem's seed are hundreds of
    MiB, a moved home may carry only a few): they are not archived, and the manifest
    names them.  ``compiler_caches``: which of the GPU workers' Triton and Inductor caches
    travel (``kernelopt.cache_transfer``): by default Inductor's benchmark results alone,
    so a large model's compile on the next machine benchmarks nothing again; "all" adds
    the compiled code.  ``progress`` hears each phase's bytes.
    """
    home = settings.home
    skip = set(leave_out)
    if not home.is_dir():
        raise StateTransferError(f"{home} does not exist: nothing to export")
    if not store_only and not settings.embedded:
        raise StateTransferError(
            f"campaign histories live in the Temporal cluster at {settings.temporal_address}, "
            "not here: export the artifact store alone with --store-only"
        )
    server: ServerState = _server_state(settings) if settings.embedded else "external"
    db = settings.server_dir / "temporal.db"
    if not store_only and not db.is_file():
        raise StateTransferError(
            f"no server database at {db}: nothing to resume from (--store-only exports the "
            "artifact store alone)"
        )
    archive = Path(archive).resolve()
    if archive.is_relative_to(home.resolve()):
        raise StateTransferError(f"write the archive outside {home} (it would archive itself)")
    archive.parent.mkdir(parents=True, exist_ok=True)
    warnings = []
    if server == "running":
        warnings.append(
            "the server here is still running: this is a snapshot. Stop this machine's server "
            "and workers before resuming the archive elsewhere, or the campaign runs twice"
        )
    entries: list[ManifestFile] = []
    left: list[str] = []
    notes: list[str] = []
    caches: CachesInfo | None = None
    tell = progress or (lambda phase, done, total: None)
    staging = Path(tempfile.mkdtemp(prefix=".state-export-", dir=archive.parent))
    partial = archive.with_name(f".{archive.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        last_write = ""
        with _open_private(partial) as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            if not store_only:
                last_write = _mtime_iso(db)
                snapshot = staging / "temporal.db"
                tell("database", 0, db.stat().st_size)
                _backup_database(db, snapshot)
                entries.append(_add_file(tar, snapshot, DB_NAME))
                tell("database", entries[-1].size, db.stat().st_size)
            files = [p for part in FILE_PARTS for p in _files_of(home / part)]
            total = sum(_size(p) for p in files)
            tell("state files", 0, total)
            for path in files:
                name = path.relative_to(home).as_posix()
                if name in skip:
                    left.append(name)
                    tell("state files", _size(path), total)
                    continue
                entries.append(_add_file(tar, path, name))
                tell("state files", entries[-1].size, total)
            if compiler_caches != "none":
                caches = _pack_caches(settings, tar, staging, entries, tell, notes, compiler_caches)
            if store_only:
                last_write = _newest_write(home / "artifacts")
            manifest = StateManifest(
                kind="store-only" if store_only else "full",
                created_at=_now(),
                source=f"{socket.gethostname()}:{home}",
                server=server,
                last_write_at=last_write,
                kernelopt_version=_version("kernelopt"),
                temporalio_version=_version("temporalio"),
                temporal_cli_version=_temporal_cli_version(),
                code=code_fingerprint(),
                files=entries,
                left_out=left,
                compiler_caches=caches,
            )
            data = manifest.model_dump_json(indent=2).encode()
            info = tarfile.TarInfo(MANIFEST_NAME)
            info.size, info.mode, info.mtime = len(data), 0o600, int(datetime.now(UTC).timestamp())
            tar.addfile(info, _BytesReader(data))
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    log.info("state exported", archive=str(archive), files=len(entries), server=server)
    return TransferReport(
        archive=archive,
        archive_sha256=file_digest(archive),
        manifest=manifest,
        parts=_summaries(entries),
        warnings=warnings,
        notes=notes,
    )


def _pack_caches(
    settings: Settings,
    tar: tarfile.TarFile,
    staging: Path,
    entries: list[ManifestFile],
    tell: PhaseProgress,
    notes: list[str],
    scope: Literal["autotune", "all"],
) -> CachesInfo | None:
    """The GPU workers' caches into ``tar`` (None when there are none, with a note if they
    were asked for by name)."""
    root = settings.compiler_caches_dir
    if not worker_folders(root):
        if scope == "all":
            notes.append(
                f"no GPU worker compiler caches under {root}: exported the rest without them"
            )
        return None
    total = cache_bytes(root, scope)
    tell("compiler caches", 0, total)

    def add(_tar: tarfile.TarFile, name: str, size: int, sha256: str) -> None:
        entries.append(ManifestFile(path=name, size=size, sha256=sha256))

    info = pack_caches(
        tar, root, staging, add, lambda done: tell("compiler caches", done, total), scope
    )
    behind = sum(w.left_behind for w in info.workers)
    what = "compiler caches" if scope == "all" else "autotuning results"
    notes.append(
        f"{what}: {len(info.workers)} worker(s), {info.files} file(s), "
        f"{human_bytes(info.bytes)} (torch {info.torch_version}, triton {info.triton_version})"
    )
    if behind:
        notes.append(
            f"{behind} cache file(s) left behind: changed while a candidate's cache-guard "
            "window was open and not yet checked (they are compiled again on the new machine)"
        )
    return info


def _server_state(settings: Settings) -> ServerState:
    """running; lost (a pid file with no server: it never stopped cleanly); or stopped."""
    server = EmbeddedServer(settings)
    if server.status().pid is not None:  # alive, answering or not: it may still write
        return "running"
    return "lost" if server.pid_path.exists() else "stopped"


def _backup_database(source: Path, target: Path) -> None:
    """A consistent copy through SQLite's backup API (one step: one read transaction)."""
    try:
        src = sqlite3.connect(f"file:{source}?mode=rw", uri=True, timeout=30)
        try:
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
                (check,) = dst.execute("PRAGMA quick_check").fetchone()
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.DatabaseError as exc:
        raise StateTransferError(f"cannot read the server database {source}: {exc}") from exc
    if check != "ok":
        raise StateTransferError(f"the server database {source} is damaged: {check}")
    os.chmod(target, file_mode())


def _files_of(root: Path) -> list[Path]:
    """Regular files under ``root``, sorted; temp files of writes in flight are skipped."""
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.name.startswith(".tmp-"):
            continue
        out.append(path)
    return out


def _add_file(tar: tarfile.TarFile, path: Path, name: str) -> ManifestFile:
    """Archive ``path`` as ``name`` from one open descriptor, hashing what is written: a file
    replaced meanwhile (the store writes by rename) is read as it was when opened."""
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = stat.st_size, 0o600, int(stat.st_mtime)
        reader = _HashingReader(handle)
        try:
            tar.addfile(info, reader)
        except OSError as exc:  # truncated in place while read: not a write we make
            raise StateTransferError(f"{path} changed while it was archived: {exc}") from exc
    return ManifestFile(path=name, size=stat.st_size, sha256=reader.digest.hexdigest())


# --- import ------------------------------------------------------------------------------------
def read_manifest(archive: Path) -> StateManifest:
    """The manifest of ``archive``; a file that is not one of our archives is an error."""
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            return _manifest_of(tar, archive)
    except (OSError, tarfile.TarError) as exc:
        raise StateTransferError(f"{archive} is not a kernelopt state archive ({exc})") from exc


def import_state(
    settings: Settings,
    archive: Path,
    force: bool = False,
    store_only: bool = False,
    *,
    host: str | None = None,
    gpus: Sequence[tuple[str, str]] | None = None,
) -> TransferReport:
    """Restore ``archive`` into ``settings.home`` after checking every file's digest.

    Compiler caches in the archive go to this machine's GPU workers (``host``, default
    this host's name; ``gpus``, default ``nvidia-smi``'s (index, UUID) pairs), and only
    when the torch and triton that wrote them are the ones installed here: otherwise the
    import is refused, or with ``force`` goes ahead without them.
    """
    archive = Path(archive).resolve()
    if not archive.is_file():
        raise StateTransferError(f"{archive} does not exist")
    manifest = read_manifest(archive)
    with_db = manifest.kind == "full" and not store_only
    if with_db and not settings.embedded:
        raise StateTransferError(
            f"this machine uses the Temporal cluster at {settings.temporal_address}: import "
            "the artifact store alone with --store-only"
        )
    home = settings.home
    if with_db and EmbeddedServer(settings).status().running:
        raise StateTransferError(
            f"the Temporal dev server of {home} is running: `kernelopt server stop` first"
        )
    wanted = [f for f in manifest.files if with_db or f.path != DB_NAME]
    warnings, notes = [], []
    caches = manifest.compiler_caches
    placements: list[Placement] = []
    if caches is not None:
        mismatch = version_mismatch(caches)
        # benchmark results alone never serve code: other versions' are left out, not refused
        if mismatch and not force and caches.scope == "all":
            raise StateTransferError(
                f"the archive's compiler caches were written by other compiler versions "
                f"({mismatch}): a cache from another torch or triton is useless at best and "
                "serves wrong kernels at worst. Install the same versions here, or pass "
                "--force to import everything else and leave the caches out"
            )
        if mismatch:
            warnings.append(f"compiler caches left out: {mismatch}")
            wanted = [f for f in wanted if _part_of(f.path) != CACHES_PART]
            caches = None
        else:
            here = gpus if gpus is not None else _gpu_ids()
            if not here:
                notes.append("no GPU visible here: caches keep the source's GPU ids")
            placements = place_workers(
                caches, settings.compiler_caches_dir, host or socket.gethostname(), here
            )
            notes += [p.note for p in placements if p.note]
    parts = sorted({_part_of(f.path) for f in wanted} - {CACHES_PART})
    occupied = [p for p in parts if _occupied(home, p)]
    busy = [p for p in placements if p.target is not None and _has_files(p.target)]
    if caches is not None and caches.scope == "autotune":
        # a worker here with caches of its own keeps them: its own timings are as good
        for p in busy:
            notes.append(f"autotuning results for {p.target.name} not restored: it has caches")
        placements = [p for p in placements if p not in busy]
    else:
        occupied += [f"{CACHES_PART}/{p.target.name}" for p in busy]
    if occupied and not force:
        raise StateTransferError(
            f"{home} already holds state ({', '.join(occupied)}); import into an empty "
            "KERNELOPT_HOME, or pass --force to replace it"
        )
    private_dir(home)
    staging = Path(tempfile.mkdtemp(prefix=".state-import-", dir=home))
    try:
        _extract_checked(archive, wanted, staging)
        for part in parts:
            _swap_in(staging, home, part)
        restored = _swap_in_caches(staging, settings, caches, placements, warnings)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    archive_sha = file_digest(archive)
    sources = tuple(f"{CACHES_PART}/{r.split(' -> ')[0]}/" for r in restored)
    moved_caches = [f for f in wanted if sources and f.path.startswith(sources)]
    if restored:
        notes.append(
            f"compiler caches restored: {len(moved_caches)} file(s), "
            f"{human_bytes(sum(f.size for f in moved_caches))} ({'; '.join(restored)})"
        )
    move = StateMove(
        archive_sha256=archive_sha,
        exported_at=manifest.created_at,
        exported_from=manifest.source,
        source_server=manifest.server,
        last_write_at=manifest.last_write_at,
        imported_at=_now(),
        imported_to=f"{socket.gethostname()}:{home}",
        kind="full" if with_db else "store-only",
        compiler_caches_files=len(moved_caches),
        compiler_caches_bytes=sum(f.size for f in moved_caches),
        compiler_caches=restored,
    )
    record_move(open_store(settings.artifacts_dir), move)
    if manifest.server == "running":
        warnings.append(
            f"the archive is a snapshot of a running server on {manifest.source}: make sure "
            "that machine's server and workers are stopped, or the campaign runs twice"
        )
    if manifest.code != code_fingerprint():
        warnings.append(
            f"the exporting machine ran other code ({manifest.code}, here {code_fingerprint()}): "
            "run the same kernelopt version here, or replaying open campaigns fails"
        )
    log.info("state imported", archive=str(archive), files=len(wanted), home=str(home))
    return TransferReport(
        archive=archive,
        archive_sha256=archive_sha,
        manifest=manifest,
        parts=_summaries(wanted),
        warnings=warnings,
        notes=notes,
    )


def _swap_in_caches(
    staging: Path,
    settings: Settings,
    caches: CachesInfo | None,
    placements: list[Placement],
    warnings: list[str],
) -> list[str]:
    """Move each checked worker's caches to its worker here; "source -> target" for each."""
    if caches is None:
        return []
    sources = {w.name: w for w in caches.workers}
    root = private_dir(settings.compiler_caches_dir)
    done = []
    for placement in placements:
        staged = staging / CACHES_PART / placement.source
        if placement.target is None or not staged.is_dir():
            continue
        dropped = relocate_groups(staged, sources[placement.source].source_dir, placement.target)
        if dropped:
            warnings.append(
                f"{placement.source}: {dropped} Triton group file(s) named paths outside its "
                "cache and were dropped"
            )
        target = placement.target
        _clear_place(target)
        shutil.move(staged, target)  # a copy when the caches live on another file system
        os.chmod(target, dir_mode())
        done.append(f"{placement.source} -> {target.relative_to(root)}")
    return done


def _gpu_ids() -> list[tuple[str, str]]:
    """This machine's GPUs as (index, UUID), from ``nvidia-smi`` (empty without it)."""
    return [(row[0], row[1]) for row in smi_query("index,uuid") or [] if len(row) == 2]


def _manifest_of(tar: tarfile.TarFile, archive: Path) -> StateManifest:
    try:
        member = tar.getmember(MANIFEST_NAME)
    except KeyError:
        raise StateTransferError(f"{archive} has no {MANIFEST_NAME}: not a state archive") from None
    handle = tar.extractfile(member)
    if handle is None:
        raise StateTransferError(f"{archive}: {MANIFEST_NAME} is not a file")
    manifest = StateManifest.model_validate_json(handle.read())
    if manifest.format != FORMAT:
        raise StateTransferError(
            f"{archive} is format {manifest.format}; this kernelopt reads format {FORMAT}"
        )
    return manifest


def _extract_checked(archive: Path, wanted: list[ManifestFile], staging: Path) -> None:
    """Write the wanted members under ``staging`` with our modes; sizes and digests must match
    the manifest, and a member the manifest does not name is refused (never extracted)."""
    expected = {f.path: f for f in wanted}
    named = {f.path for f in read_manifest(archive).files} | {MANIFEST_NAME}
    seen: set[str] = set()
    with tarfile.open(archive, mode="r:gz") as tar:
        for member in tar:
            if member.name not in named or not member.isfile() or member.name in seen:
                raise StateTransferError(
                    f"{archive}: unexpected member {member.name!r} (damaged or not ours)"
                )
            seen.add(member.name)
            entry = expected.get(member.name)
            if entry is None:
                continue
            source = tar.extractfile(member)
            if source is None:  # isfile() above makes this unreachable; never extract blind
                raise StateTransferError(f"{archive}: cannot read {member.name!r}")
            target = staging / entry.path
            private_dir(target.parent)
            digest = hashlib.sha256()
            size = 0
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode())
            with os.fdopen(fd, "wb") as out:
                for chunk in iter(lambda src=source: src.read(_CHUNK), b""):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if size != entry.size or digest.hexdigest() != entry.sha256:
                raise StateTransferError(
                    f"{archive}: {entry.path} does not match its manifest digest "
                    "(the archive is damaged; nothing was changed)"
                )
    missing = sorted(set(expected) - seen)
    if missing:
        raise StateTransferError(
            f"{archive} lacks {len(missing)} file(s) its manifest names, e.g. {missing[0]}"
        )


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.rglob("*"))


def _part_of(path: str) -> str:
    return "server" if path == DB_NAME else path.split("/", 1)[0]


def _occupied(home: Path, part: str) -> bool:
    if part == "server":
        return (home / DB_NAME).exists()
    root = home / part
    return root.is_dir() and any(p.is_file() for p in root.rglob("*"))


def _swap_in(staging: Path, home: Path, part: str) -> None:
    """Replace one part of the home by its checked copy (the database with its WAL files
    removed: a stale write-ahead log next to a new database would be replayed into it)."""
    if part == "server":
        server_dir = private_dir(home / "server")
        for suffix in ("", "-wal", "-shm", "-journal"):
            (server_dir / f"temporal.db{suffix}").unlink(missing_ok=True)
        (server_dir / "server.pid").unlink(missing_ok=True)
        os.replace(staging / DB_NAME, server_dir / "temporal.db")
        return
    target = home / part
    _clear_place(target)
    os.replace(staging / part, target)
    os.chmod(target, dir_mode())


def _clear_place(target: Path) -> None:
    """Remove whatever stands at ``target`` -- a link (never followed), a file or a tree --
    so that a checked copy can be moved into its place."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)


# --- helpers -----------------------------------------------------------------------------------
class _HashingReader:
    """A file-like reader that hashes what tarfile copies out of it."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.handle.read(size)
        self.digest.update(chunk)
        return chunk


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else self.pos + size
        chunk, self.pos = self.data[self.pos : end], min(end, len(self.data))
        return chunk


@contextlib.contextmanager
def _open_private(path: Path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, file_mode())
    with os.fdopen(fd, "wb") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def _summaries(entries: list[ManifestFile]) -> list[PartSummary]:
    out: dict[str, PartSummary] = {}
    for entry in entries:
        part = _part_of(entry.path)
        summary = out.setdefault(part, PartSummary(part=part, files=0, bytes=0))
        summary.files += 1
        summary.bytes += entry.size
    return list(out.values())


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def human_bytes(size: int) -> str:
    """Bytes for people: 1.2 GiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _mtime_iso(path: Path) -> str:
    """The newest write of a SQLite database: its file or its write-ahead log."""
    stamps = [p.stat().st_mtime for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    return datetime.fromtimestamp(max(stamps), UTC).isoformat()


def _newest_write(root: Path) -> str:
    stamps = [p.stat().st_mtime for p in _files_of(root)]
    return datetime.fromtimestamp(max(stamps), UTC).isoformat() if stamps else _now()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _temporal_cli_version() -> str:
    """The dev server's version: its database schema must be one the importing server reads."""
    try:
        done = subprocess.run(
            [str(temporal_binary()), "--version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired, KernelOptError):
        return "unknown"
    return done.stdout.strip() or "unknown"


__all__ = [
    "ManifestFile",
    "PhaseProgress",
    "StateManifest",
    "StateTransferError",
    "TransferReport",
    "export_state",
    "human_bytes",
    "import_state",
    "read_manifest",
]
