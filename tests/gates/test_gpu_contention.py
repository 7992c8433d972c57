"""Gate 4 says when other work on the GPU made its rounds disagree, and asks only then.

The identity corpus on the H200 (docs/results/h200/nineteenth/call1): one round's CUDA
events read 0.026 ms, another's 0.28 ms for the same eager forward -- work the gate does
not own.  NVML's utilisation while the gate is idle shows it; a clean measurement never
pays for the reading, and the reading never changes a verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gates.gpu_contention as contention
import gates.perf as perf
from gates.gpu_contention import OtherWork, nvml_device, other_work, sample_idle, wait_for_quiet
from gates.perf import PerfMeasurement
from gates.perf_verdict import perf_verdict
from gates.protocol import TimingJob, TimingResult
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateSettings, GateStatus
from kernelopt.gpu_busy import NvmlUnavailable
from tests.support.paired_timing import measure_on

GAMMA = 1.03


def _side(event: float, host: float) -> TimingResult:
    return TimingResult(side="x", event_ms=event, event_samples=[event] * 5, host_ms=host)


# the identity's rounds on a shared H200: events 10x apart, both sides alike, ratios scattered
NOISY = [(0.026, 0.21), (0.28, 0.47), (0.14, 0.37), (0.027, 0.35)]
NOISY_CAND = [(0.16, 0.40), (0.14, 0.37), (0.08, 0.29), (0.20, 0.25)]


def test_idle_samples_tell_other_work_from_an_idle_gpu() -> None:
    readings = iter([0.0, 60.0, 90.0, 0.0, 45.0, 0.0, 80.0, 70.0, 0.0, 55.0])
    busy = sample_idle(
        lambda: (next(readings), 0.0), seconds=0.5, interval_s=0.05, sleep=lambda _s: None
    )
    assert busy.samples == 10 and busy.busy_share == pytest.approx(0.6)
    assert busy.mean_util == pytest.approx(40.0) and busy.seen
    idle = sample_idle(lambda: (0.0, 0.0), seconds=0.5, interval_s=0.05, sleep=lambda _s: None)
    assert not idle.seen and "busy with other work" in busy.describe()


def test_a_trace_of_our_own_child_is_not_other_work() -> None:
    """The H200 with no other process (scripts/gpu_host_noise.py's idle reading: 0% and no
    compute process) read "30% of 10 samples busy, mean utilisation 1%" right after a
    round: NVML's look-back still held the gate's own last kernels."""
    trace = iter([2.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    reading = sample_idle(
        lambda: (next(trace), 0.0), seconds=0.5, interval_s=0.05, sleep=lambda _s: None
    )
    assert reading.busy_share == pytest.approx(0.3) and not reading.seen


def test_the_reading_waits_out_nvmls_look_back(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(contention, "nvml_source", lambda _d: ((lambda: (0.0, 0.0)), lambda: None))
    reading = other_work("cuda", 0.1, sleep=slept.append)
    assert reading is not None and slept[0] == contention.LOOK_BACK_S


def test_the_gates_gpu_is_the_workers_pinned_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234,1")
    assert nvml_device("cuda") == "GPU-1234"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_device("cuda:2") == "2" and nvml_device("cuda") == "0"


def test_no_nvml_or_no_gpu_is_no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    assert other_work("cpu") is None

    def unavailable(_device: str) -> Any:
        raise NvmlUnavailable("no driver")

    monkeypatch.setattr(contention, "nvml_source", unavailable)
    assert other_work("cuda") is None


def _verdict(other: OtherWork | None) -> Any:
    m = PerfMeasurement(
        baseline=[_side(*r) for r in NOISY],
        candidate=[_side(*r) for r in NOISY_CAND],
        other_work=other,
    )
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=4)
    return perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)[0]


def test_a_quarantine_says_the_gpu_was_busy_with_other_work() -> None:
    v = _verdict(OtherWork(samples=10, busy_share=0.6, mean_util=40.0))
    assert v.status == GateStatus.QUARANTINE
    assert "busy with other work" in v.reason and v.metrics["other_work"]["seen"]
    quiet = _verdict(OtherWork(samples=10, busy_share=0.0, mean_util=0.0))
    assert quiet.status == GateStatus.QUARANTINE and "other work" not in quiet.reason
    assert quiet.metrics["other_work"]["seen"] is False
    assert "other_work" not in _verdict(None).metrics


class _Children:
    def __init__(self, rounds: list[tuple[TimingResult, TimingResult]]) -> None:
        self.rounds, self.calls = rounds, 0

    def __call__(self, job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        first, second = self.rounds[self.calls % len(self.rounds)]
        self.calls += 1
        result = second.model_copy(update={"baseline": first}).model_dump(mode="json")
        return ChildOutcome(status="ok", phase="save_checks", wall_s=1.0, result=result)


def test_nvml_is_read_only_after_rounds_that_stay_unstable(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def reading(device: str) -> OtherWork:
        asked.append(device)
        return OtherWork(samples=10, busy_share=0.5, mean_util=30.0)

    monkeypatch.setattr(perf, "other_work", reading)
    steady = _Children([(_side(0.5, 0.45), _side(0.5, 0.45))])
    assert measure_on(steady, monkeypatch, min_rounds=2, max_rounds=4).other_work is None
    assert asked == []
    noisy = _Children([(_side(*b), _side(*c)) for b, c in zip(NOISY, NOISY_CAND, strict=True)])
    m = measure_on(noisy, monkeypatch, min_rounds=2, max_rounds=4, noisy_rounds=0)
    assert asked == ["cuda"] and m.other_work is not None and m.other_work.seen


def _looks(*busy: bool) -> Any:
    """A probe that answers busy or quiet in turn, and a clock that moves 0.2 s a look."""
    answers = iter(busy)
    now = [0.0]

    def probe(_device: str, seconds: float) -> OtherWork | None:
        now[0] += seconds
        busy = next(answers)
        return OtherWork(samples=4, busy_share=float(busy), mean_util=50.0 if busy else 0.0)

    return probe, lambda: now[0]


def test_a_round_waits_for_other_work_to_pause_and_no_longer_than_the_limit() -> None:
    probe, clock = _looks(True, True, False)
    assert wait_for_quiet("cuda", 5.0, probe=probe, clock=clock) == pytest.approx(0.6)
    probe, clock = _looks(*[True] * 100)
    assert wait_for_quiet("cuda", 1.0, probe=probe, clock=clock) == pytest.approx(1.0)
    assert wait_for_quiet("cuda", 0.0, probe=probe, clock=clock) is None  # off by default
    assert wait_for_quiet("cuda", 1.0, probe=lambda _d, _s: None) is None  # no NVML


def test_measure_waits_before_every_round_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []

    def waited(device: str, limit_s: float) -> float | None:
        asked.append(limit_s)
        return 0.4 if limit_s > 0 else None

    monkeypatch.setattr(perf, "wait_for_quiet", waited)
    steady = _Children([(_side(0.5, 0.45), _side(0.5, 0.45))])
    assert measure_on(steady, monkeypatch, min_rounds=2, max_rounds=4).quiet_waits == []
    m = measure_on(steady, monkeypatch, min_rounds=2, max_rounds=4, quiet_gpu_wait_s=3.0)
    assert m.quiet_waits == [0.4] * len(m.candidate) and asked[-1] == 3.0
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=4)
    v = perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)[0]
    assert v.metrics["quiet_gpu_waits_s"] == m.quiet_waits
