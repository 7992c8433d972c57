"""A search decision on one root-state candidate, as the agents' feedback texts read it."""

from __future__ import annotations

from typing import Any

from kernelopt.contracts.search import Candidate, Decision, Plan


def root_decision(
    direction: str = "tile",
    description: str = "d",
    *,
    accepted: bool = True,
    attempt: int = 0,
    reason: str = "ok",
    **fields: Any,
) -> Decision:
    """A decision on candidate ``c-DIRECTION`` (a child of the root state) with ``fields``."""
    candidate = Candidate(
        id=f"c-{direction}",
        target_id="t",
        parent_id="root",
        iteration=0,
        source=None,
        plan=Plan(direction=direction, description=description),
        attempt=attempt,
    )
    return Decision(candidate=candidate, accepted=accepted, reason=reason, **fields)
