"""Exported campaigns in the artifact store: the index, its named pointer, loading it back.

Histories and artifacts are content-addressed like everything else; what
the store cannot do by itself is find "the export of campaign X" after the
server forgot X.  So the index artifact is also named by a small pointer
file, ``refs/campaigns/<campaign id>.json`` under the store's root (the
two-hex-digit fan-out of blobs never collides with ``refs``), written
atomically and last, so a pointer always names a complete export.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from temporalio.client import WorkflowHistory

from kernelopt.contracts import ArtifactRef
from kernelopt.contracts.audit import ExportIndex, ExportIndexInput, ExportIndexResult, WorkflowRun
from kernelopt.store import ArtifactStore, write_atomic

from .history import iter_payloads

_SHA = re.compile(r"^[0-9a-f]{64}$")


def _refs_dir(store: ArtifactStore) -> Path:
    root = getattr(store.backend, "root", None)
    if root is None:
        raise NotImplementedError(
            "this artifact backend has no named references; exports need a local/shared root"
        )
    return Path(root) / "refs" / "campaigns"


def pointer_path(store: ArtifactStore, campaign_id: str) -> Path:
    return _refs_dir(store) / f"{quote(campaign_id, safe='')}.json"


def _refs_in(value: object, found: dict[str, ArtifactRef]) -> None:
    """Every ArtifactRef-shaped dict inside a decoded payload."""
    if isinstance(value, dict):
        sha = value.get("sha256")
        if isinstance(sha, str) and _SHA.match(sha) and isinstance(value.get("size"), int):
            found.setdefault(sha, ArtifactRef.model_validate(value))
        for item in value.values():
            _refs_in(item, found)
    elif isinstance(value, list):
        for item in value:
            _refs_in(item, found)


def referenced_artifacts(histories: list[WorkflowHistory]) -> list[ArtifactRef]:
    """Artifacts named anywhere in these histories' payloads, in first-seen order."""
    from .history import decode

    found: dict[str, ArtifactRef] = {}
    for history in histories:
        for event in history.events:
            for value in decode(iter_payloads(event)):
                _refs_in(value, found)
    return list(found.values())


def write_index(store: ArtifactStore, inp: ExportIndexInput) -> ExportIndexResult:
    """Index an export: runs, referenced artifacts (present / missing), then the pointer."""
    histories = [
        WorkflowHistory.from_json(e.run.workflow_id, store.get_text(e.history))
        for e in inp.exported
    ]
    refs = referenced_artifacts(histories)
    present = [r for r in refs if store.exists(r)]
    missing = [r.sha256 for r in refs if not store.exists(r)]
    index = ExportIndex(
        campaign_id=inp.campaign_id,
        status=inp.status,
        exported_at=datetime.now(UTC).isoformat(),
        runs=inp.exported,
        artifacts=present,
        missing=missing,
    )
    ref = store.put_json(index, name=f"{inp.campaign_id}.export.json")
    write_atomic(pointer_path(store, inp.campaign_id), ref.model_dump_json().encode())
    return ExportIndexResult(
        index=ref, runs=len(inp.exported), artifacts=len(present), missing=len(missing)
    )


def find_export(store: ArtifactStore, campaign_id: str) -> tuple[ArtifactRef, ExportIndex] | None:
    """The latest export of a campaign, or None."""
    try:
        path = pointer_path(store, campaign_id)
    except NotImplementedError:
        return None
    if not path.is_file():
        return None
    ref = ArtifactRef.model_validate(json.loads(path.read_text()))
    return ref, store.get_model(ref, ExportIndex)


def load_histories(
    store: ArtifactStore, index: ExportIndex
) -> list[tuple[WorkflowRun, WorkflowHistory]]:
    return [
        (e.run, WorkflowHistory.from_json(e.run.workflow_id, store.get_text(e.history)))
        for e in index.runs
    ]


__all__ = [
    "find_export",
    "load_histories",
    "pointer_path",
    "referenced_artifacts",
    "write_index",
]
