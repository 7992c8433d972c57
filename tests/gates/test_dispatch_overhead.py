"""Gate 4's "faster per kernel, slower in the model" rejection, from measured numbers."""

from __future__ import annotations

from gates.perf import PerfMeasurement
from gates.perf_verdict import dispatch_overhead, perf_verdict
from gates.protocol import TimingResult
from kernelopt.contracts.verdicts import GateSettings, GateStatus

SETTINGS = GateSettings(device="cuda", min_rounds=1, max_rounds=1)


def _side(side: str, event_ms: float, graph_ms: float | None, note: str = "") -> TimingResult:
    return TimingResult(
        side=side,
        event_ms=event_ms,
        event_samples=[event_ms] * 5,
        host_ms=event_ms * 1.05,
        graph_ms=graph_ms,
        graph_note=note,
    )


def _v4(base: tuple[float, float | None], cand: tuple[float, float | None], note: str = ""):
    m = PerfMeasurement(
        baseline=[_side("baseline", *base, note=note)],
        candidate=[_side("candidate", *cand, note=note)],
        order=["baseline", "candidate"],
    )
    v4, _, _ = perf_verdict(m, settings=SETTINGS, gamma=SETTINGS.gamma, roofline=None)
    return v4


def test_faster_kernels_in_a_slower_forward_are_rejected_with_both_numbers() -> None:
    # softmax rows: the kernel replays in 0.070 ms against Inductor's 0.074 ms, but a
    # launcher doing per-call Python work makes the dispatched forward 0.140 ms
    v4 = _v4((0.074, 0.0735), (0.140, 0.0700))
    assert v4.status == GateStatus.FAIL and v4.metrics["graph_replay"]["speedup"] > 1.03
    verdict = dispatch_overhead(v4, gamma=1.03)
    assert verdict is not None and verdict.status == GateStatus.FAIL
    assert verdict.gate.value == "performance"
    assert "faster per kernel, slower in the model" in verdict.reason
    assert "1.05x" in verdict.reason and "0.529x" in verdict.reason
    assert "single launch" in verdict.feedback


def test_slower_in_both_stays_ranking_data() -> None:
    v4 = _v4((0.074, 0.0735), (0.223, 0.220))  # a poor kernel: slower by graph replay too
    assert v4.status == GateStatus.FAIL
    assert dispatch_overhead(v4, gamma=1.03) is None


def test_a_faster_forward_is_never_rejected_for_its_kernels() -> None:
    v4 = _v4((0.074, 0.0735), (0.070, 0.0690))
    assert v4.status == GateStatus.PASS and dispatch_overhead(v4, gamma=1.03) is None


def test_without_graph_times_there_is_no_claim() -> None:
    v4 = _v4((0.074, None), (0.140, None), note="no CUDA-graph time: RuntimeError: sync")
    assert "speedup" not in v4.metrics["graph_replay"]
    assert v4.metrics["graph_replay"]["notes"]
    assert dispatch_overhead(v4, gamma=1.03) is None
