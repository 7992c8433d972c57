"""A reference remembers what gate 4's first paired round found of its baseline, for the
next candidate it judges (``GateSettings.reuse_host_probe``; batch ``verify``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.perf import PerfMeasurement
from kernelopt.contracts.verdicts import CascadeResult, GateSettings

TESTS = Path(__file__).resolve().parents[1]
PROBLEM = TESTS / "problems" / "gates" / "swish_bias.py"
CANDIDATE = TESTS / "fixtures" / "candidates" / "gates" / "swish_fused.py"


def test_the_next_candidate_on_a_reference_starts_from_its_baselines_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_launcher: bool
) -> None:
    import gates.cascade as cascade
    from gates.reference import prepare_reference

    settings = GateSettings(device="cpu")
    bundle = prepare_reference(PROBLEM, settings, tmp_path / "reference")
    told: list[bool] = []

    def measure(_baseline: Any, _candidate: Any, setup: Any, **_: Any) -> PerfMeasurement:
        told.append(setup.baseline_dispatch_bound)
        return PerfMeasurement(baseline_dispatch_bound=True)  # as a first paired round finds

    monkeypatch.setattr(cascade, "measure", measure)
    checked = CascadeResult(
        problem=str(PROBLEM), candidate=str(CANDIDATE), verdicts=[], accepted=True
    )
    for _ in range(2):
        cascade.time_candidate(checked, bundle, settings, tmp_path)
    assert told == [False, True] and bundle.baseline_dispatch_bound is True
