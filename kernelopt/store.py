"""Content-addressed artifact store: the claim-check half of every Temporal payload.

Blobs are named by their sha256, written atomically (temp file + rename, so a
crash never leaves a half-written artifact under a valid name) and verified on
every read (a corrupted disk or a tampered file is an error, not a wrong
kernel).  Writing content that is already there checks the existing file's
digest first, so a corrupt blob is repaired by the next put of the same bytes.
Files are owner-only by default (``KERNELOPT_SHARED_GROUP=1``: group-readable,
for shared volumes; see deploy/README.md).  ``ArtifactBackend`` is the seam an
S3-compatible store implements.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel

from kernelopt.contracts.base import ArtifactRef
from kernelopt.log import get_logger

_LOG = get_logger(__name__)

M = TypeVar("M", bound=BaseModel)


GROUP_ENV = "KERNELOPT_SHARED_GROUP"


def _group_mode() -> bool:
    """Opt-in (``KERNELOPT_SHARED_GROUP=1``): a store on a volume shared by workers running
    as different users of one group.  Default: owner only."""
    return os.environ.get(GROUP_ENV, "").strip().lower() in ("1", "true", "yes", "on", "t", "y")


def file_mode() -> int:
    """0600 (owner only), or 0640 in group mode: blobs never change once written."""
    return 0o640 if _group_mode() else 0o600


def dir_mode() -> int:
    """0700, or 02770 in group mode (group members add blobs; setgid keeps the group)."""
    return 0o2770 if _group_mode() else 0o700


def private_dir(path: Path) -> Path:
    """Create ``path`` and missing parents with ``dir_mode`` (existing ones are left alone,
    the leaf is tightened): state and artifacts are not for other users to read."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=dir_mode())
        os.chmod(directory, dir_mode())  # mkdir's mode is filtered by the umask
    if path.is_dir() and path.stat().st_uid == os.getuid():
        os.chmod(path, dir_mode())
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a synced temp file and rename: readers see all of it or nothing.

    The file is owner-only (``file_mode``; group-readable only in the opt-in
    group mode): artifacts hold weights, held-out inputs and kernels.
    """
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ArtifactError(RuntimeError):
    """An artifact is missing or does not match its hash."""


class ArtifactBackend(Protocol):
    """Where blobs live.  Keys are sha256 hex digests; values are immutable bytes."""

    def exists(self, sha256: str) -> bool: ...

    def read(self, sha256: str) -> bytes: ...

    def write(self, sha256: str, data: bytes) -> None: ...


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks (raises OSError if unreadable)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _digest_of(path: Path) -> str:
    try:
        return file_digest(path)
    except OSError:
        return ""


class LocalBackend:
    """A directory of blobs fanned out by the first two hex digits."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).is_file()

    def read(self, sha256: str) -> bytes:
        try:
            return self._path(sha256).read_bytes()
        except FileNotFoundError as exc:
            raise ArtifactError(f"artifact {sha256[:12]} is not in {self.root}") from exc

    def write(self, sha256: str, data: bytes) -> None:
        """Skip only a file already holding these bytes; a corrupt one is replaced."""
        path = self._path(sha256)
        if path.is_file() and _digest_of(path) == sha256:
            return
        if path.exists():
            _LOG.warning("artifact was corrupt; rewriting it", sha256=sha256[:12])
        write_atomic(path, data)


class ArtifactStore:
    """Typed puts and verified gets over a backend."""

    def __init__(self, backend: ArtifactBackend) -> None:
        self.backend = backend

    def put_bytes(
        self, data: bytes, media_type: str = "application/octet-stream", name: str = ""
    ) -> ArtifactRef:
        digest = hashlib.sha256(data).hexdigest()
        self.backend.write(digest, data)
        return ArtifactRef(sha256=digest, size=len(data), media_type=media_type, name=name)

    def put_text(self, text: str, media_type: str = "text/plain", name: str = "") -> ArtifactRef:
        return self.put_bytes(text.encode("utf-8"), media_type=media_type, name=name)

    def put_json(self, value: BaseModel | dict | list, name: str = "") -> ArtifactRef:
        if isinstance(value, BaseModel):
            text = value.model_dump_json(indent=2)
        else:
            text = json.dumps(value, indent=2, sort_keys=True, default=str)
        return self.put_text(text, media_type="application/json", name=name)

    def put_file(self, path: Path, media_type: str = "application/octet-stream") -> ArtifactRef:
        return self.put_bytes(Path(path).read_bytes(), media_type=media_type, name=Path(path).name)

    def get_bytes(self, ref: ArtifactRef | str) -> bytes:
        digest = ref if isinstance(ref, str) else ref.sha256
        data = self.backend.read(digest)
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ArtifactError(
                f"artifact {digest[:12]} is corrupt (content hashes to {actual[:12]})"
            )
        return data

    def get_text(self, ref: ArtifactRef | str) -> str:
        return self.get_bytes(ref).decode("utf-8")

    def get_json(self, ref: ArtifactRef | str) -> object:
        return json.loads(self.get_text(ref))

    def get_model(self, ref: ArtifactRef | str, model: type[M]) -> M:
        return model.model_validate_json(self.get_bytes(ref))

    def exists(self, ref: ArtifactRef | str) -> bool:
        return self.backend.exists(ref if isinstance(ref, str) else ref.sha256)

    def materialize(self, ref: ArtifactRef, directory: Path, filename: str | None = None) -> Path:
        """Write an artifact to a plain file (for child processes, ncu, importlib)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / (filename or ref.name or ref.sha256)
        data = self.get_bytes(ref)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return path


def open_store(root: Path | None = None) -> ArtifactStore:
    """The store configured for this process (``$KERNELOPT_HOME/artifacts`` by default)."""
    if root is None:
        from kernelopt.config import Settings

        root = Settings.from_env().artifacts_dir
    return ArtifactStore(LocalBackend(root))
