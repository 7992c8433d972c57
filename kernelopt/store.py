"""Content-addressed artifact store: the claim-check half of every Temporal payload.

Blobs are named by their sha256, written atomically (temp file + rename, so a
crash never leaves a half-written artifact under a valid name) and verified on
every read (a corrupted disk or a tampered file is an error, not a wrong
kernel).  ``ArtifactBackend`` is the seam an S3-compatible store implements.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel

from kernelopt.contracts.base import ArtifactRef

M = TypeVar("M", bound=BaseModel)


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once: os.umask can only be read by setting it, which would race with threads
# creating files meanwhile.
_UMASK = _read_umask()


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a synced temp file and rename: readers see all of it or nothing.

    The file gets the mode a plain open() would (0o666 less the umask), not mkstemp's
    0o600: a store on a shared volume is read by workers running as other users.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
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
        path = self._path(sha256)
        if not path.is_file():
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
        path.write_bytes(self.get_bytes(ref))
        return path


def open_store(root: Path | None = None) -> ArtifactStore:
    """The store configured for this process (``$KERNELOPT_HOME/artifacts`` by default)."""
    if root is None:
        from kernelopt.config import Settings

        root = Settings.from_env().artifacts_dir
    return ArtifactStore(LocalBackend(root))
