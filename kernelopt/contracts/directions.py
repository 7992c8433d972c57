"""Plan directions as one key: what the planner's reply parser and the search policy compare.

The parser drops banned or repeated directions and the search bans directions it
is stuck on; both must agree on when two directions are the same, so the rule has
one home below both.  Standard library only (the workflow sandbox imports it).
"""

from __future__ import annotations

import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_direction(direction: str) -> str:
    """'Vectorize  loads!' -> 'vectorize-loads': the key the meltdown detector compares."""
    return _NON_ALNUM.sub("-", direction.lower()).strip("-")


def is_banned(direction: str, banned: list[str]) -> bool:
    """Whether ``direction`` is one of ``banned`` once both are normalised (an empty key never is)."""
    key = normalize_direction(direction)
    return bool(key) and key in {normalize_direction(b) for b in banned}


__all__ = ["is_banned", "normalize_direction"]
