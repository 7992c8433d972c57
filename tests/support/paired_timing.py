"""``gates.perf.measure`` driven by a stand-in for its paired timing children.

Gate 4's round logic (how many rounds, when to stop, the order control) is
pure bookkeeping around ``run_job``; a test replaces ``run_job`` with a
double that answers like a paired child and measures on it in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gates.perf as perf
from gates.perf import PerfMeasurement, RoundSetup, TimingChecks, measure
from gates.protocol import ModelSource
from gates.runner import ChildOutcome
from gates.timed_checks import TimedCheck
from kernelopt.contracts.verdicts import GateSettings

BASE = ModelSource(kind="eager", problem_path="p.py")
CAND = ModelSource(kind="candidate", problem_path="p.py", candidate_path="c.py")


def measure_on(
    children: Callable[..., ChildOutcome],
    monkeypatch: pytest.MonkeyPatch,
    *,
    graph_replay: bool = False,
    baseline_dispatch_bound: bool = False,
    **settings: Any,
) -> PerfMeasurement:
    """``measure`` of CAND against BASE on CUDA settings, every child answered by ``children``.

    Paired rounds throughout unless ``host_clock_turns`` is given: the stand-in children
    answer paired jobs only, and a host-clock round would otherwise go on in turn sessions.
    """
    settings.setdefault("host_clock_turns", 0)
    monkeypatch.setattr(perf, "run_job", children)
    checks = TimingChecks(
        input_sets=["seed0"], expected=[], check=lambda _p, _once: TimedCheck(ok=True, calls=10)
    )
    setup = RoundSetup(
        inputs_dir=Path("in"),
        input_set="seed0",
        settings=GateSettings(device="cuda", **settings),
        checks=checks,
        graph_replay=graph_replay,
        baseline_dispatch_bound=baseline_dispatch_bound,
    )
    return measure(BASE, CAND, setup, workdir=Path("w"))
