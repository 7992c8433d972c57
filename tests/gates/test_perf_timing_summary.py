"""What gate 4 hands the agents' feedback: the forward's decision with its noise and
interval and the CUDA-graph times, from a real ``perf_verdict``, small and sample-free."""

from __future__ import annotations

import json

from gates.perf import PerfMeasurement
from gates.perf_verdict import perf_verdict, timing_summary
from gates.protocol import TimingResult
from kernelopt.contracts.verdicts import GateSettings

SETTINGS = GateSettings(device="cuda", min_rounds=3, max_rounds=3)


def _side(side: str, event_ms: float, graph_ms: float | None) -> TimingResult:
    return TimingResult(
        side=side,
        event_ms=event_ms,
        event_samples=[event_ms] * 50,
        host_ms=event_ms * 1.02,
        graph_ms=graph_ms,
    )


def test_the_summary_keeps_the_decision_noise_interval_and_graph_times() -> None:
    m = PerfMeasurement(
        baseline=[_side("baseline", ms, 0.0683) for ms in (0.2292, 0.2301, 0.2285)],
        candidate=[_side("candidate", ms, 0.0741) for ms in (0.2464, 0.2470, 0.2455)],
        order=["baseline", "candidate"],
    )
    v4, _, _ = perf_verdict(m, settings=SETTINGS, gamma=SETTINGS.gamma, roofline=None)
    summary = timing_summary(v4.metrics)
    decision = summary["decision"]
    assert decision["category"] == "slower"
    assert decision["baseline_ms"] == v4.metrics["baseline"]["median_ms"]
    assert decision["candidate_ms"] == v4.metrics["candidate"]["median_ms"]
    assert 0 < decision["noise"] < 0.01
    assert decision["speedup_low"] <= decision["speedup"] <= decision["speedup_high"]
    assert "reason" not in decision
    assert summary["graph_replay"]["baseline_ms"] == 0.0683
    assert summary["graph_replay"]["candidate_ms"] == 0.0741
    assert "gpu_work" in summary
    assert len(json.dumps(summary)) < 1000  # carried in every decision of the search state


def test_no_graph_time_means_no_graph_entry() -> None:
    m = PerfMeasurement(
        baseline=[_side("baseline", 0.2292, None)],
        candidate=[_side("candidate", 0.2464, None)],
        order=["baseline", "candidate"],
    )
    settings = SETTINGS.model_copy(update={"min_rounds": 1, "max_rounds": 1})
    v4, _, _ = perf_verdict(m, settings=settings, gamma=settings.gamma, roofline=None)
    summary = timing_summary(v4.metrics)
    assert "graph_replay" not in summary and "decision" in summary
    assert timing_summary({}) == {}
