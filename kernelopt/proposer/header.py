"""The JSON a whole-forward candidate records on its first line, read back.

Library and regeneration candidates both start with ``<HEADER><json>``; one
reader keeps what counts as "not one of ours" the same for both.
"""

from __future__ import annotations

import json


def header_json(source: str, header: str) -> object | None:
    """The JSON after ``header`` on the first line of ``source`` (None: no such header, or junk)."""
    first = source.split("\n", 1)[0]
    if not first.startswith(header):
        return None
    try:
        return json.loads(first[len(header) :])
    except ValueError:
        return None


__all__ = ["header_json"]
