"""Counting physical GPU executions in the test workers (``KERNELOPT_TEST_EXECUTIONS``).

The GPU worker wraps each double with ``counted`` *inside* the product's
``memoized``: a record is appended only when a double's work really ran to its
end, with the call's identity (workflow id, run id, activity id) and the
process, so a test can tell a result computed twice from one returned from the
store.  A SIGKILL between the record and the store write is the one legitimate
way to see two; ``doubled`` excuses exactly that.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio import activity

EXECUTIONS_ENV = "KERNELOPT_TEST_EXECUTIONS"


def counted(fn: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """The activity ``fn`` under its own name, logging each finished physical execution."""
    definition = activity._Definition.must_from_callable(fn)

    @functools.wraps(definition.fn, updated=())
    async def run(inp: Any) -> Any:
        result = await definition.fn(inp)
        path = os.environ.get(EXECUTIONS_ENV)
        if path:
            info = activity.info()
            record = {
                "activity": info.activity_type,
                "call": [info.workflow_id, info.workflow_run_id, info.activity_id],
                "attempt": info.attempt,
                "pid": os.getpid(),
                "t": time.time(),
            }
            with open(path, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        return result

    return activity.defn(name=definition.name)(run)


def executions(path: Path) -> dict[tuple, list[dict]]:
    """Finished physical executions per call."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                out[(record["activity"], *record["call"])].append(record)
    return out


def doubled(path: Path, killed: dict[int, float], grace_s: float = 1.0) -> dict[tuple, int]:
    """Calls computed more than once, beyond a completion whose worker was SIGKILLed
    within ``grace_s`` after it (before it could store the result)."""
    out = {}
    for call, runs in executions(path).items():
        runs = sorted(runs, key=lambda r: r["t"])
        excused = sum(
            1 for r in runs[:-1] if r["pid"] in killed and 0 <= killed[r["pid"]] - r["t"] <= grace_s
        )
        if len(runs) - excused > 1:
            out[call] = len(runs)
    return out
