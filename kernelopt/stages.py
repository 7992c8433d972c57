"""Seconds per stage of one activity, so a slow GPU activity says where its time went."""

from __future__ import annotations

import time


class StageClock:
    """Laps between named points of an activity body, summed per stage name.

    A stage's time minus its children's wall time (``*_child`` entries) is the
    parent's own share: workspace files, input hashing, guards.
    """

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.seconds: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._last, 3)
        self._last = now
