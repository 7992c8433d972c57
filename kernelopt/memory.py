"""Experience memory: small, situation -> action entries the planner can reuse.

docs/method.md#checker: a prompt carries only high-confidence, actionable insights
that name a situation and an action, retrieved by hierarchical tags plus
keywords, and bounded -- in the first Proteus design most tokens went to
reading and writing memory.  So:

* entries are ``Experience`` records (situation, action, effect, tags) plus a
  support count: the same lesson learned twice is one entry seen twice;
* retrieval scores hierarchical tag matches (``kind/reduction`` matches
  ``kind/reduction/persistent``) and keyword overlap, and stops at a token
  budget (~4 characters per token);
* the store is bounded (least supported, oldest entries go first);
* per campaign it lives in the artifact store (content-addressed, so each
  update is a new reference the workflow carries); across campaigns it is an
  opt-in JSON file under ``$KERNELOPT_HOME/memory/``.

Keyword scoring stands in for the "semantic" half of hybrid search: no
embedding model is assumed to be available offline.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.search import Experience
from kernelopt.file_lock import exclusive_lock
from kernelopt.store import ArtifactStore, write_atomic

MAX_ENTRIES = 200
CHARS_PER_TOKEN = 4
SHARED_FILE = "experience.json"

_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "into",
        "than",
        "then",
        "when",
        "were",
        "was",
        "are",
        "has",
        "have",
        "not",
        "but",
        "use",
        "used",
        "using",
        "its",
        "per",
        "via",
        "all",
        "any",
        "can",
        "may",
        "more",
        "less",
        "only",
        "also",
        "over",
        "under",
        "kernel",
    ]
)


class MemoryEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    situation: str
    action: str
    effect: str = ""
    tags: list[str] = Field(default_factory=list)
    support: int = 1
    campaigns: list[str] = Field(default_factory=list)
    seq: int = 0  # insertion counter: recency, deterministic ties

    def experience(self) -> Experience:
        return Experience(
            situation=self.situation, action=self.action, effect=self.effect, tags=self.tags
        )

    def render(self) -> str:
        seen = f" (seen {self.support}x)" if self.support > 1 else ""
        effect = f" -> {self.effect}" if self.effect else ""
        return f"- When {self.situation}: {self.action}{effect}{seen}"


def entry_id(situation: str, action: str) -> str:
    key = " ".join(situation.lower().split()) + "|" + " ".join(action.lower().split())
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def keywords(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def tag_score(query_tags: Sequence[str], entry_tags: Sequence[str]) -> float:
    """Hierarchical match: for each query tag the best share of its path an entry tag shares."""
    score = 0.0
    for q in query_tags:
        q_parts = [p for p in q.lower().split("/") if p]
        if not q_parts:
            continue
        best = 0.0
        for t in entry_tags:
            t_parts = [p for p in t.lower().split("/") if p]
            common = 0
            for a, b in zip(q_parts, t_parts, strict=False):
                if a != b:
                    break
                common += 1
            # a shared top level alone ("kind/") says nothing: need the value too
            if common >= min(2, len(q_parts)):
                best = max(best, common / len(q_parts))
        score += best
    return score


class ExperienceMemory:
    """A bounded, deduplicated list of entries with tag + keyword retrieval."""

    def __init__(self, entries: Iterable[MemoryEntry] = (), max_entries: int = MAX_ENTRIES):
        self.max_entries = max_entries
        self.entries: dict[str, MemoryEntry] = {}
        self._seq = 0
        for entry in entries:
            self.entries[entry.id] = entry
            self._seq = max(self._seq, entry.seq + 1)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, experiences: Iterable[Experience], campaign_id: str = "") -> int:
        """Merge experiences in; returns how many were new.  Repeats raise support instead."""
        new = 0
        for exp in experiences:
            eid = entry_id(exp.situation, exp.action)
            old = self.entries.get(eid)
            if old is None:
                self.entries[eid] = MemoryEntry(
                    id=eid,
                    situation=exp.situation,
                    action=exp.action,
                    effect=exp.effect,
                    tags=sorted({t.lower() for t in exp.tags}),
                    campaigns=[campaign_id] if campaign_id else [],
                    seq=self._seq,
                )
                new += 1
            else:
                campaigns = sorted({*old.campaigns, campaign_id} - {""})
                self.entries[eid] = old.model_copy(
                    update={
                        "support": old.support + 1,
                        "effect": exp.effect or old.effect,
                        "tags": sorted({*old.tags, *(t.lower() for t in exp.tags)}),
                        "campaigns": campaigns,
                        "seq": self._seq,
                    }
                )
            self._seq += 1
        self._evict()
        return new

    def merge(self, other: ExperienceMemory) -> None:
        for entry in sorted(other.entries.values(), key=lambda e: e.seq):
            if entry.id in self.entries:
                mine = self.entries[entry.id]
                self.entries[entry.id] = mine.model_copy(
                    update={
                        "support": max(mine.support, entry.support),
                        "tags": sorted({*mine.tags, *entry.tags}),
                        "campaigns": sorted({*mine.campaigns, *entry.campaigns}),
                    }
                )
            else:
                self.entries[entry.id] = entry.model_copy(update={"seq": self._seq})
                self._seq += 1
        self._evict()

    def _evict(self) -> None:
        if len(self.entries) <= self.max_entries:
            return
        keep = sorted(self.entries.values(), key=lambda e: (-e.support, -e.seq))
        self.entries = {e.id: e for e in keep[: self.max_entries]}

    def retrieve(
        self,
        tags: Sequence[str] = (),
        query: str = "",
        max_tokens: int = 400,
        limit: int = 8,
    ) -> list[MemoryEntry]:
        """The best-matching entries whose rendering fits in ``max_tokens``."""
        words = keywords(query)
        scored: list[tuple[float, int, MemoryEntry]] = []
        for entry in self.entries.values():
            t = tag_score(tags, entry.tags)
            entry_words = keywords(f"{entry.situation} {entry.action} {entry.effect}")
            k = len(words & entry_words) / math.sqrt(len(entry_words)) if entry_words else 0.0
            if t == 0.0 and k == 0.0:
                continue
            score = 2.0 * t + k + 0.1 * math.log1p(entry.support)
            scored.append((score, entry.seq, entry))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        chosen: list[MemoryEntry] = []
        used = 0
        for _, _, entry in scored:
            cost = len(entry.render()) // CHARS_PER_TOKEN + 1
            if used + cost > max_tokens:
                continue
            chosen.append(entry)
            used += cost
            if len(chosen) == limit:
                break
        return chosen

    def render(self, entries: Sequence[MemoryEntry]) -> str:
        return "\n".join(e.render() for e in entries) if entries else "(none yet)"

    # --- persistence ---------------------------------------------------------------------
    def to_json(self) -> str:
        ordered = sorted(self.entries.values(), key=lambda e: e.seq)
        return json.dumps({"version": 1, "entries": [e.model_dump() for e in ordered]}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ExperienceMemory:
        data = json.loads(text) if text.strip() else {}
        return cls(MemoryEntry.model_validate(e) for e in data.get("entries", []))

    def save(self, store: ArtifactStore, name: str = "memory.json") -> ArtifactRef:
        return store.put_text(self.to_json(), media_type="application/json", name=name)

    @classmethod
    def load(cls, store: ArtifactStore, ref: ArtifactRef | None) -> ExperienceMemory:
        return cls() if ref is None else cls.from_json(store.get_text(ref))


def shared_path(home: Path) -> Path:
    return Path(home) / "memory" / SHARED_FILE


def load_shared(home: Path) -> ExperienceMemory:
    path = shared_path(home)
    if not path.is_file():
        return ExperienceMemory()
    return ExperienceMemory.from_json(path.read_text())


def update_shared(home: Path, memory: ExperienceMemory) -> None:
    """Merge ``memory`` into the cross-campaign file: locked, atomically replaced."""
    path = shared_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path.with_suffix(".lock")):
        merged = load_shared(home)
        merged.merge(memory)
        write_atomic(path, merged.to_json().encode())
