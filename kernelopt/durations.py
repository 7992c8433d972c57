"""One way to say how long something takes, for messages a person reads."""

from __future__ import annotations


def human_duration(seconds: float) -> str:
    """``45 s``, ``12 min`` or ``3.5 h``: the unit changes where the number would grow long."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
