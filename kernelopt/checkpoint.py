"""Resumable progress for long work running in a supervised child process.

The child reports progress with ``report(detail)``; the parent activity turns
each report into a Temporal heartbeat.  When the activity is retried (worker
killed, heartbeat timeout), the last heartbeat detail comes back through
``resume_detail()`` so the work continues where it stopped instead of starting
over.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROGRESS_PREFIX = "KERNELOPT_PROGRESS "
RESUME_ENV = "KERNELOPT_RESUME"
SPAWNED_AT_ENV = "KERNELOPT_SPAWNED_AT"  # time.time() when the supervisor spawned the child


def report(detail: dict[str, Any]) -> None:
    """Send a heartbeat detail to the supervising activity (no-op outside one)."""
    sys.stderr.write(PROGRESS_PREFIX + json.dumps(detail, default=str) + "\n")
    sys.stderr.flush()


def resume_detail() -> dict[str, Any] | None:
    """The last detail a previous attempt reported, if this is a retry."""
    raw = os.environ.get(RESUME_ENV)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
