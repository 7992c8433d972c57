"""The journal of a campaign's state moving between machines (``kernelopt state import``).

A campaign carried across machine loans has no event in its Temporal history
for the moment its machine was lost or for the import that resumed it: the
history only shows the retried activities.  ``kernelopt state import`` therefore
appends one ``StateMove`` per import to a journal in the artifact store's root
(``refs/state/moves.jsonl``, next to the campaign exports), so the journal
travels with every later export and the audit can show each loss and resume.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kernelopt.store import ArtifactStore, write_atomic


class StateMove(BaseModel):
    """One import of exported state: where it came from, how the source ended, where it went."""

    model_config = ConfigDict(frozen=True)

    archive_sha256: str
    exported_at: str
    exported_from: str  # host:home of the source
    source_server: str  # running (live snapshot) / stopped / lost (killed, never stopped)
    last_write_at: str  # the source database's last write: when a lost machine stopped
    imported_at: str
    imported_to: str  # host:home of the destination
    kind: str = "full"  # full / store-only
    # GPU workers' compiler caches that came along (``--compiler-caches``), and where they went
    compiler_caches_files: int = 0
    compiler_caches_bytes: int = 0
    compiler_caches: list[str] = Field(default_factory=list)  # "<source worker> -> <worker here>"


def journal_path(store: ArtifactStore) -> Path | None:
    """``refs/state/moves.jsonl`` under a local store's root (None for other backends)."""
    root = getattr(store.backend, "root", None)
    return None if root is None else Path(root) / "refs" / "state" / "moves.jsonl"


def read_moves(store: ArtifactStore) -> list[StateMove]:
    """Every recorded move, oldest first; a missing journal is an empty one."""
    path = journal_path(store)
    if path is None or not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [StateMove.model_validate_json(line) for line in lines if line.strip()]


def record_move(store: ArtifactStore, move: StateMove) -> None:
    """Append ``move`` (rewritten atomically: the journal is small, one line per import)."""
    path = journal_path(store)
    if path is None:
        return
    moves = [*read_moves(store), move]
    text = "".join(json.dumps(m.model_dump(mode="json")) + "\n" for m in moves)
    write_atomic(path, text.encode("utf-8"))


def moves_during(moves: list[StateMove], started_at: str, closed_at: str) -> list[StateMove]:
    """The moves that interrupted a campaign: the source stopped after it started, and the
    import came before it closed (a running campaign has no ``closed_at``)."""
    start = _when(started_at)
    end = _when(closed_at)
    return [
        m
        for m in moves
        if (start is None or _when(m.imported_at) >= start)  # type: ignore[operator]
        and (end is None or _when(m.last_write_at) <= end)  # type: ignore[operator]
    ]


def _when(value: str) -> datetime | None:
    if not value:
        return None
    when = datetime.fromisoformat(value)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


__all__ = ["StateMove", "journal_path", "moves_during", "read_moves", "record_move"]
