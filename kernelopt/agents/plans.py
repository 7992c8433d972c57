"""Dropping duplicate plans before any code is written for them.

A planner asked several times (beam states, rounds) proposes the same idea in
new words; each duplicate costs an executor call and a gate run.  Two plans
are duplicates when their directions normalise to the same label or their
descriptions share most of their content words (Jaccard similarity of word
sets).  Pure functions, so the workflow may call them deterministically.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelopt.contracts.search import Plan

SIMILARITY = 0.7  # word-set Jaccard at or above which two descriptions are the same idea
_WORD = re.compile(r"[a-z0-9_]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "to",
        "of",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "into",
        "use",
        "using",
        "it",
        "its",
        "is",
        "are",
        "be",
        "this",
        "that",
        "each",
        "per",
        "so",
        "as",
        "at",
        "or",
        "than",
        "then",
        "which",
        "more",
        "less",
    ]
)


def _direction_key(direction: str) -> str:
    return " ".join(_WORD.findall(direction.lower()))


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def similarity(a: Plan, b: Plan) -> float:
    """1.0 for the same direction label, else the Jaccard similarity of the descriptions."""
    if _direction_key(a.direction) == _direction_key(b.direction):
        return 1.0
    wa, wb = _words(a.description), _words(b.description)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def dedupe_plans(
    plans: Sequence[Plan], tried: Sequence[Plan] = (), threshold: float = SIMILARITY
) -> tuple[list[Plan], list[Plan]]:
    """(kept, dropped): plans that repeat an earlier one (in ``tried`` or in this list) drop."""
    kept: list[Plan] = []
    dropped: list[Plan] = []
    for plan in plans:
        if any(similarity(plan, other) >= threshold for other in (*tried, *kept)):
            dropped.append(plan)
        else:
            kept.append(plan)
    return kept, dropped
