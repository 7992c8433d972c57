"""Gate 4's rounds: one paired child per round, a decisive first round, failures by side.

``run_job`` is replaced by a double that answers like a paired timing child, so
these run in milliseconds; the real child is exercised by the adversarial CPU
suite (``baseline_leftovers`` among it) and ``scripts/gpu_verdict_cost.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.perf import EARLY_MARGIN, PerfMeasurement, decided_by_one_round, side_phases
from gates.perfstats import decide_category
from gates.protocol import TimingJob, TimingResult
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateSettings, PerfCategory
from tests.support.paired_timing import BASE, CAND, measure_on

GAMMA = 1.03


def _result(side: str, ms: float, *, host: bool = False) -> TimingResult:
    """A side's round; ``host``: a dispatch-bound forward, its GPU work a fifth of its host time."""
    event = ms / 5 if host else ms
    return TimingResult(side=side, event_ms=event, event_samples=[event] * 5, host_ms=ms)


class _Children:
    """Answers each job like a paired child: the baseline's and candidate's round times."""

    def __init__(
        self,
        rounds: list[tuple[float, float]],
        fail: list[str] | None = None,
        *,
        host: bool = False,
    ) -> None:
        self.rounds, self.fail, self.jobs, self.host = rounds, fail, [], host

    def __call__(self, job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        self.jobs.append(job)
        if self.fail is not None:
            return ChildOutcome(status="crashed", phase=self.fail[-1], wall_s=1.0, phases=self.fail)
        b, c = self.rounds[len(self.jobs) - 1]
        base = _result("baseline", b, host=self.host)
        result = _result("candidate", c, host=self.host).model_copy(update={"baseline": base})
        progress = [{"phase": "load_job", "t": 0.0}, {"phase": "baseline", "t": 0.1}]
        progress += [{"phase": "base_warm", "t": 0.3}, {"phase": "base_forget", "t": 0.6}]
        progress += [{"phase": "candidate", "t": 0.7}, {"phase": "warm", "t": 0.8}]
        progress += [{"phase": "save_checks", "t": 1.2}]
        return ChildOutcome(
            status="ok",
            phase="save_checks",
            wall_s=1.5,
            result=result.model_dump(mode="json"),
            progress=progress,
            phases=[p["phase"] for p in progress],
        )


def test_one_round_needs_a_speedup_twice_past_the_gamma_band() -> None:
    edge = GAMMA * EARLY_MARGIN
    assert decided_by_one_round(edge * 1.01, 1.0, GAMMA)  # optimized beyond doubt
    assert decided_by_one_round(1.0, edge * 1.01, GAMMA)  # slower beyond doubt
    assert not decided_by_one_round(edge * 0.99, 1.0, GAMMA)  # a 2x win: two processes
    assert not decided_by_one_round(1.10, 1.0, GAMMA)
    assert not decided_by_one_round(1.0, 1.0, GAMMA)
    assert not decided_by_one_round(0.0, 1.0, GAMMA)


def test_every_round_is_one_child_timing_the_baseline_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    children = _Children([(1.0, 0.95), (1.0, 0.96), (1.0, 0.95)])
    m = measure_on(children, monkeypatch, min_rounds=2, max_rounds=3)
    assert len(children.jobs) == 2  # two independent processes: the spread is known
    assert all(j.baseline == BASE and j.model == CAND for j in children.jobs)
    assert m.order == ["baseline", "candidate"] * 2
    assert [r.event_ms for r in m.baseline] == [1.0, 1.0]
    assert all(r.baseline is None for r in m.candidate)
    # the child's phases are charged to the side they ran for, and add up to its wall time
    assert m.phase_seconds["baseline.forget"] == pytest.approx(0.2)
    assert m.phase_seconds["candidate.warm"] == pytest.approx(0.8)
    assert sum(m.phase_seconds.values()) == pytest.approx(m.seconds)


def test_the_settle_wall_cap_reaches_every_timing_child(monkeypatch: pytest.MonkeyPatch) -> None:
    children = _Children([(1.0, 0.95)] * 2)
    measure_on(children, monkeypatch, min_rounds=2, max_rounds=2)
    assert [j.settle_wall_ms for j in children.jobs] == [0.0, 0.0]  # off unless asked for
    capped = _Children([(1.0, 0.95)] * 2)
    measure_on(capped, monkeypatch, min_rounds=2, max_rounds=2, settle_step_wall_ms=50.0)
    assert [j.settle_wall_ms for j in capped.jobs] == [50.0, 50.0]


def test_a_first_round_far_outside_the_band_ends_the_measurement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    win = _Children([(1.0, 0.2)] * 3)
    assert len(measure_on(win, monkeypatch, min_rounds=2).candidate) == 1
    loss = _Children([(0.2, 1.0)] * 3)
    assert len(measure_on(loss, monkeypatch, min_rounds=2).candidate) == 1
    close = _Children([(1.0, 0.7)] * 3)  # 1.43x: optimized, but not beyond doubt
    assert len(measure_on(close, monkeypatch, min_rounds=2).candidate) == 2


def test_a_round_the_host_clock_decides_never_decides_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # on the H200 one paired child read the identity of a 10-us forward 0.443x, its GPU
    # work 1.000x: the host clock of one process misread identical code by 2.26x
    far = _Children([(1.0, 2.26)] * 3, host=True)
    assert len(measure_on(far, monkeypatch, min_rounds=2, order_control_rounds=0).candidate) == 2


def test_host_clock_rounds_that_disagree_need_more_processes_to_settle_a_category(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two rounds whose extremes both read "slower" (0.79x and 0.93x), then the truth: matched
    rounds = [(1.0, 1.27), (1.0, 1.08)] + [(1.0, 1.0), (1.0, 0.99), (1.0, 1.01)] * 3
    host = measure_on(_Children(rounds, host=True), monkeypatch, min_rounds=2)
    assert len(host.candidate) >= 4
    decision = decide_category(
        [PerfMeasurement.primary(r) for r in host.baseline],
        [PerfMeasurement.primary(r) for r in host.candidate],
        gamma=GAMMA,
        noise_limit=0.10,
    )
    assert decision.category == PerfCategory.MATCHED
    # the GPU's events decide the same two rounds at once, as before
    events = measure_on(_Children(rounds), monkeypatch, min_rounds=2)
    assert len(events.candidate) == 2
    # and host-clock rounds that agree stop at the minimum, as before
    steady = _Children([(1.0, 1.0)] * 4, host=True)
    assert len(measure_on(steady, monkeypatch, min_rounds=2).candidate) == 2


@pytest.mark.parametrize(
    ("phases", "side"),
    [
        (["load_job", "baseline", "base_build"], "baseline"),
        (["load_job", "baseline", "base_forget", "candidate", "import"], "candidate"),
    ],
)
def test_a_failed_child_is_charged_to_the_side_whose_part_it_died_in(
    monkeypatch: pytest.MonkeyPatch, phases: list[str], side: str
) -> None:
    m = measure_on(_Children([], fail=phases), monkeypatch, min_rounds=2)
    assert m.failure is not None and m.failure[0] == side
    assert not m.baseline and not m.candidate


def test_side_phases_keeps_process_start_up_with_the_baseline() -> None:
    outcome = ChildOutcome(
        status="ok",
        phase="warm",
        wall_s=2.0,
        progress=[
            {"phase": "load_job", "t": 0.0},
            {"phase": "base_warm", "t": 0.5},
            {"phase": "candidate", "t": 1.0},
            {"phase": "warm", "t": 1.1},
        ],
    )
    phases = side_phases(outcome)
    assert phases == {
        "baseline.load_job": 0.5,
        "baseline.warm": 0.5,
        "candidate.start": 0.1,
        "baseline.outside": 0.9,
    }


def test_a_verdict_from_one_round_says_so() -> None:
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import perf_verdict
    from kernelopt.contracts.verdicts import GateStatus, PerfCategory

    m = PerfMeasurement(baseline=[_result("baseline", 1.0)], candidate=[_result("candidate", 0.2)])
    v, category, _ = perf_verdict(
        m, settings=GateSettings(device="cuda", min_rounds=2), gamma=GAMMA, roofline=None
    )
    assert v.status == GateStatus.PASS and category == PerfCategory.OPTIMIZED
    assert v.metrics["one_round"] and "one round decided it" in v.reason
    two = PerfMeasurement(baseline=m.baseline * 2, candidate=m.candidate * 2)
    v2, _, _ = perf_verdict(
        two, settings=GateSettings(device="cuda", min_rounds=2), gamma=GAMMA, roofline=None
    )
    assert "one_round" not in v2.metrics and "one round" not in v2.reason
    # one round because the settings asked for one: no early decision to report, but its
    # spread is still no noise estimate, which the agents' feedback must not claim
    v1, _, _ = perf_verdict(
        m, settings=GateSettings(device="cuda", min_rounds=1), gamma=GAMMA, roofline=None
    )
    assert v1.metrics["one_round"] and "one round" not in v1.reason


def test_noise_that_could_flip_the_category_buys_more_rounds_past_max_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a launch-bound 1.5x win whose host timer has two slow candidate rounds in six:
    # undecided at max_rounds, decided once ten rounds let two outliers go
    noisy = [(1.0, 0.66), (1.0, 1.05), (1.0, 0.66), (1.0, 1.1)] + [(1.0, 0.66)] * 6
    children = _Children(noisy)
    m = measure_on(children, monkeypatch, min_rounds=2, max_rounds=6, noisy_rounds=4)
    assert len(m.candidate) == 10
    steady = _Children([(1.0, 0.66), (1.0, 0.8), (1.0, 0.70)] * 4)  # noisy but decided
    assert len(measure_on(steady, monkeypatch, min_rounds=2, max_rounds=6).candidate) <= 6
    hopeless = _Children([(1.0, 0.66), (1.0, 1.2)] * 8)  # still undecided: stops at the cap
    m = measure_on(hopeless, monkeypatch, min_rounds=2, max_rounds=6, noisy_rounds=4)
    assert len(m.candidate) == 10
    none = _Children(noisy)
    assert len(measure_on(none, monkeypatch, max_rounds=6, noisy_rounds=0).candidate) == 6


def test_a_quarantine_of_a_dispatch_bound_forward_says_what_the_gpu_work_alone_read() -> None:
    """Identical code the host clock could not settle: the reason shows the GPU's events
    agree, so a reader sees why the timing was noisy, not that the kernel changed."""
    from gates.perf_verdict import perf_verdict
    from kernelopt.contracts.verdicts import GateStatus

    gpu = 0.0054  # the GPU work of every round, both sides

    def side(name: str, host_ms: float) -> TimingResult:
        return TimingResult(side=name, event_ms=gpu, event_samples=[gpu] * 5, host_ms=host_ms)

    m = PerfMeasurement(
        baseline=[side("baseline", 0.027)] * 6,
        candidate=[side("candidate", ms) for ms in (0.020, 0.036, 0.025, 0.030, 0.021, 0.034)],
    )
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=6, noisy_rounds=0)
    v, _, _ = perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)
    assert v.status == GateStatus.QUARANTINE, v.reason
    assert "timing not stable" in v.reason and "GPU work alone" in v.reason


@pytest.mark.parametrize(
    ("candidate_events_ms", "accepted"),
    [
        ((0.021, 0.021), True),
        ((0.027, 0.027), True),
        ((0.093, 0.021), True),
        ((0.093, 0.093), False),
    ],
    ids=["same", "1.3x", "4x-in-one-round", "4x"],
)
def test_a_match_the_host_clock_makes_of_slower_gpu_work_is_rejected(
    candidate_events_ms: tuple[float, float], accepted: bool
) -> None:
    """A dispatch-bound baseline in a slow host regime (0.095 ms a call, 0.021 ms of GPU
    work) reads like a candidate whose kernels take 0.093 ms: matched by the gate's
    numbers, slower by its GPU work alone in every round, which a faster host would show.
    A match whose GPU work is equal, 1.3x (the spread of identical code's GPU work across
    processes), or slower in one round only stays accepted."""
    from gates.perf_verdict import perf_verdict
    from kernelopt.contracts.verdicts import GateStatus

    def side(name: str, event_ms: float, host_ms: float) -> TimingResult:
        return TimingResult(
            side=name, event_ms=event_ms, event_samples=[event_ms] * 5, host_ms=host_ms
        )

    m = PerfMeasurement(
        baseline=[side("baseline", 0.021, 0.095)] * 2,
        candidate=[side("candidate", ms, 0.093) for ms in candidate_events_ms],
    )
    v, category, speedup = perf_verdict(
        m, settings=GateSettings(device="cuda", min_rounds=2), gamma=GAMMA, roofline=None
    )
    if accepted:
        assert v.status == GateStatus.PASS and category == PerfCategory.MATCHED, v.reason
        return
    assert v.status == GateStatus.FAIL and category == PerfCategory.SLOWER, v.reason
    assert "GPU work alone 0.021 -> 0.093 ms" in v.reason and "matched" in v.reason
    assert speedup == pytest.approx(0.021 / 0.093)
    assert "faster host" in v.feedback
