"""Seconds per stage of one activity, so a slow GPU activity says where its time went."""

from __future__ import annotations

import time
from typing import TypeVar

R = TypeVar("R")


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


def add_stages(result: R, extra: dict[str, float], *, first: bool = False) -> R:
    """``result`` with ``extra`` among its ``stage_seconds`` (in front if ``first``), when it
    reports stages at all; the supervised process adds its start-up and exit this way."""
    stages = getattr(result, "stage_seconds", None)
    if not isinstance(stages, dict):
        return result
    merged = {**extra, **stages} if first else {**stages, **extra}
    return result.model_copy(update={"stage_seconds": merged})  # type: ignore[attr-defined]
