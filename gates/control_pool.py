"""A/A order-control rounds kept for the next verdicts of the same baseline.

An A/A round (``gates.perf.order_control``) times the baseline in both slots of the
rounds' own job: trusted code only, so no candidate can touch what it reads, and what it
reads belongs to the baseline and the job, not to any candidate. A batch ``verify`` of
several candidates on one reference would otherwise pay the same rounds again for every
win the host clock decides (a verdict with a reference of its own has a job of its own).
Each verdict still runs at least one fresh round, so the pool follows the host as it
drifts, and only rounds younger than ``MAX_AGE_S`` are lent; the verdict names how many it
borrowed and how old they were.
A pool lives in one process and holds nothing on disk.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

MAX_AGE_S = 900.0  # the host's clock drifts over minutes: older rounds are not lent
KEPT = 16  # per key, the newest rounds


@dataclass(frozen=True)
class PooledRound:
    """One A/A round (a paired child's result or a turn session) and when it ended."""

    result: Any
    ended: float  # time.monotonic()


class ControlPool:
    """A/A rounds keyed by the job that made them (baseline, inputs, settings)."""

    def __init__(self, max_age_s: float = MAX_AGE_S, kept: int = KEPT) -> None:
        self.max_age_s, self.kept = max_age_s, kept
        self._rounds: dict[str, deque[PooledRound]] = {}
        self._lock = threading.Lock()

    def lend(
        self, key: str, most: int, taken: list[PooledRound] | None = None
    ) -> list[PooledRound]:
        """Up to ``most`` of the newest rounds of ``key`` still young enough, newest first,
        none of ``taken`` (what this verdict has already)."""
        if most <= 0:
            return []
        now = time.monotonic()
        taken = taken or []
        with self._lock:
            kept = list(self._rounds.get(key, deque()))
        young = [
            r
            for r in reversed(kept)
            if now - r.ended <= self.max_age_s and not any(r is t for t in taken)
        ]
        return young[:most]

    def add(self, key: str, results: list[Any]) -> list[PooledRound]:
        """Keep freshly measured rounds of ``key`` for later verdicts; returns them pooled."""
        now = time.monotonic()
        pooled = [PooledRound(r, now) for r in results]
        with self._lock:
            self._rounds.setdefault(key, deque(maxlen=self.kept)).extend(pooled)
        return pooled


def control_key(*parts: str) -> str:
    """The pool's key for an A/A job: its full description (the job and the settings), so
    any change of baseline, inputs, settings or round kind keys a pool of its own."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


POOL = ControlPool()  # the process's pool: its verdicts share it
