"""Finished GPU results, kept under a key derived from the call's inputs.

When the server is down (or the activity timed out) at the moment a GPU
activity finishes, Temporal answers its completion with "activity not found"
and runs the activity again: the same GPU work twice (issue 25 saw it in 5 of
60 campaigns).  The GPU worker therefore stores every result here before it
reports completion, and an attempt that finds its key returns the stored
result without touching the GPU.

The key covers the input's bytes and the call's identity in its workflow run
(workflow id, run id, activity id): every attempt of one call finds it, while a
later campaign with the same input still measures afresh (gate timings and
verdicts are per campaign, never replayed from an old one).  Results live in
the content-addressed store; a small index file per key names their digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from kernelopt.contracts.base import ArtifactRef
from kernelopt.store import ArtifactStore, write_atomic

M = TypeVar("M", bound=BaseModel)


def result_key(activity_type: str, call: tuple[str, str, str], inp: BaseModel) -> str:
    """sha256 over the activity type, its call identity and the input's canonical JSON."""
    workflow_id, run_id, activity_id = call
    digest = hashlib.sha256()
    for part in (activity_type, workflow_id, run_id, activity_id, inp.model_dump_json()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class ResultIndex:
    """key -> stored result: the result is an artifact, the index names its digest."""

    def __init__(self, root: Path, store: ArtifactStore) -> None:
        self.root = Path(root)
        self.store = store

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, result_type: type[M]) -> M | None:
        """The stored result, or None when this key has none yet."""
        path = self._path(key)
        if not path.is_file():
            return None
        ref = ArtifactRef.model_validate_json(path.read_bytes())
        return self.store.get_model(ref, result_type)

    def put(self, key: str, result: BaseModel, name: str = "") -> ArtifactRef:
        """Store the result, then the index entry (a crash between leaves only a miss)."""
        ref = self.store.put_json(result, name or f"result-{key[:12]}.json")
        write_atomic(self._path(key), json.dumps(ref.model_dump(mode="json")).encode())
        return ref


def open_index(home: Path | None = None, store: ArtifactStore | None = None) -> ResultIndex:
    """The index of this ``KERNELOPT_HOME`` (``$KERNELOPT_HOME/results``)."""
    from kernelopt.config import Settings
    from kernelopt.store import open_store

    if home is None:
        home = Settings.from_env().home
    return ResultIndex(Path(home) / "results", store or open_store())
