"""Slow CPU activity bodies for the CPU-worker kill tests (test workers only).

``KERNELOPT_TEST_CPU_SLOW=segment=8,write_report=8`` makes the library call
inside those activities (segmentation, report rendering) sleep that many
seconds first, in the thread the activity runs it in, so a test can SIGKILL
the CPU worker in the middle of one.  ``KERNELOPT_TEST_CPU_MARKS=DIR`` gets
one JSON line per body start and end (``DIR/cpu_bodies.jsonl``), with the
pid and the time, so the test knows when to kill and can measure the stall.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SLOW_ENV = "KERNELOPT_TEST_CPU_SLOW"
MARKS_ENV = "KERNELOPT_TEST_CPU_MARKS"


def _mark(name: str, event: str) -> None:
    folder = os.environ.get(MARKS_ENV)
    if folder:
        record = {"activity": name, "event": event, "pid": os.getpid(), "t": time.time()}
        with (Path(folder) / "cpu_bodies.jsonl").open("a") as handle:
            handle.write(json.dumps(record) + "\n")


def _slowed(name: str, seconds: float, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def slow(*args: Any, **kwargs: Any) -> Any:
        _mark(name, "start")
        time.sleep(seconds)
        result = fn(*args, **kwargs)
        _mark(name, "end")
        return result

    return slow


def install() -> None:
    """Patch the library calls named in ``KERNELOPT_TEST_CPU_SLOW`` (in this process)."""
    wanted = {}
    for item in os.environ.get(SLOW_ENV, "").split(","):
        name, _, value = item.strip().partition("=")
        if name:
            wanted[name] = float(value or "5")
    if "segment" in wanted:
        import kernelopt.compile.segment as module

        module.segment = _slowed("segment", wanted["segment"], module.segment)
    if "write_report" in wanted:
        import activities.report_activities as module

        module.render_markdown = _slowed(
            "write_report", wanted["write_report"], module.render_markdown
        )
