"""Gate 4's baseline against the compile's own timing of it (``gates.campaign.baseline_drift``)."""

from __future__ import annotations

from gates.campaign import BASELINE_DRIFT_WARN, baseline_drift


def test_the_ratio_is_the_gate_time_over_the_compile_time() -> None:
    assert baseline_drift(6.52, 3.26) == 2.0 > BASELINE_DRIFT_WARN  # a baseline slowed twofold
    assert baseline_drift(3.3, 3.3) == 1.0


def test_no_ratio_without_both_times() -> None:
    assert baseline_drift(None, 3.3) is None  # the baseline did not time
    assert baseline_drift(3.3, 0.0) is None  # a kind whose compile does not time its baseline
