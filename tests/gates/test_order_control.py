"""Gate 4's order control: a win decided by the host clock is checked against A/A rounds.

On the H200 the identity candidate (the eager model as ``ModelNew``) read
1.08-1.30x faster than the same eager baseline in four of ten corpus problems,
all dispatch-bound and timed by the host clock (docs/TEAM_NOTES.md, eighteenth
session): the slot a paired child times second read faster for the same code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gates.perf as perf
from gates.perf import PerfMeasurement, control_ratio, host_decided_win, measure
from gates.perf_verdict import perf_verdict
from gates.protocol import TimingJob, TimingResult
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateSettings, GateStatus, PerfCategory
from tests.support.paired_timing import BASE, measure_on

GAMMA = 1.03


def _side(event: float | None, host: float) -> TimingResult:
    samples = [event if event is not None else host] * 5
    return TimingResult(side="x", event_ms=event, event_samples=samples, host_ms=host)


def _paired(first: TimingResult, second: TimingResult) -> TimingResult:
    return second.model_copy(update={"baseline": first})


# the identity's shape on the H200: GPU work equal, the second slot's host clock faster
FIRST, SECOND = _side(0.0101, 0.056), _side(0.0104, 0.043)


def test_only_a_win_the_host_clock_decides_needs_the_control() -> None:
    host_win = PerfMeasurement(baseline=[FIRST], candidate=[SECOND])
    assert host_decided_win(host_win, GAMMA)
    gpu_win = PerfMeasurement(baseline=[_side(0.5, 0.45)], candidate=[_side(0.25, 0.2)])
    assert not host_decided_win(gpu_win, GAMMA)
    no_win = PerfMeasurement(baseline=[FIRST], candidate=[FIRST])
    assert not host_decided_win(no_win, GAMMA)
    cpu = PerfMeasurement(baseline=[_side(None, 2.0)], candidate=[_side(None, 1.0)])
    assert not host_decided_win(cpu, GAMMA)
    # a win only the rounds' own ratios show (the processes differ): the control runs too
    base = [_side(0.01, ms) for ms in (0.10, 0.20, 0.05)]
    cand = [_side(0.01, ms) for ms in (0.08, 0.16, 0.10)]  # medians equal, two rounds 1.25x
    paired = PerfMeasurement(baseline=base, candidate=cand)
    assert host_decided_win(paired, GAMMA)


def _verdict(m: PerfMeasurement) -> tuple[Any, PerfCategory | None, float | None]:
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=2)
    return perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)


def test_the_identity_the_slot_order_made_faster_is_matched() -> None:
    m = PerfMeasurement(baseline=[FIRST, FIRST], candidate=[SECOND, SECOND])
    v, category, speedup = _verdict(m)
    assert category == PerfCategory.OPTIMIZED and speedup == pytest.approx(0.056 / 0.043)
    m.control = [_paired(FIRST, SECOND), _paired(FIRST, SECOND)]
    assert control_ratio(m) == pytest.approx(0.056 / 0.043)
    v, category, speedup = _verdict(m)
    assert v.status == GateStatus.PASS and category == PerfCategory.MATCHED
    assert speedup == pytest.approx(1.0)
    assert "order control" in v.reason and v.metrics["order_control"]["ratio"] > 1.29


def test_a_real_host_side_win_keeps_what_the_order_does_not_explain() -> None:
    fast = _side(0.0100, 0.020)  # fewer launches: 2.8x by the host clock
    m = PerfMeasurement(baseline=[FIRST, FIRST], candidate=[fast, fast])
    m.control = [_paired(FIRST, SECOND)]
    _, category, speedup = _verdict(m)
    assert category == PerfCategory.OPTIMIZED
    assert speedup == pytest.approx(0.056 / 0.020 / (0.056 / 0.043))


def test_a_control_that_favours_the_first_slot_never_adds_to_a_win() -> None:
    m = PerfMeasurement(baseline=[FIRST, FIRST], candidate=[SECOND, SECOND])
    m.control = [_paired(SECOND, FIRST)]
    _, category, speedup = _verdict(m)
    assert category == PerfCategory.OPTIMIZED and speedup == pytest.approx(0.056 / 0.043)


class _Children:
    """Answers each job like a paired timing child, from (first slot, second slot) pairs."""

    def __init__(self, rounds: list[tuple[TimingResult, TimingResult]]) -> None:
        self.rounds, self.jobs = rounds, []

    def __call__(self, job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        self.jobs.append(job)
        first, second = self.rounds[min(len(self.jobs), len(self.rounds)) - 1]
        result = _paired(first, second).model_dump(mode="json")
        return ChildOutcome(status="ok", phase="save_checks", wall_s=1.0, result=result)


def test_measure_runs_the_baseline_in_both_slots_after_a_host_decided_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    children = _Children([(FIRST, SECOND)])
    m = measure_on(children, monkeypatch, min_rounds=2, max_rounds=2)
    assert len(m.candidate) == 2 and len(m.control) == 2
    control_jobs = children.jobs[2:]
    assert all(j.baseline == BASE and j.model == BASE for j in control_jobs)
    assert m.seconds == pytest.approx(4.0)  # the A/A children are charged too


@pytest.mark.parametrize("graph_replay", [True, False])
def test_the_a_a_children_run_the_rounds_own_job(
    monkeypatch: pytest.MonkeyPatch, graph_replay: bool
) -> None:
    """What runs between the slots of a round (the first slot's CUDA-graph replay, in the
    campaign path) runs between the slots of the control too, or it cannot measure what
    the order does to the second slot."""
    children = _Children([(FIRST, SECOND)])
    measure_on(children, monkeypatch, graph_replay=graph_replay, min_rounds=2, max_rounds=2)
    rounds, controls = children.jobs[:2], children.jobs[2:]
    assert len(controls) == 2
    assert {j.graph_replay for j in rounds} == {j.graph_replay for j in controls} == {graph_replay}


def test_measure_skips_the_control_when_the_gpu_decides_or_it_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = _Children([(_side(0.5, 0.45), _side(0.25, 0.2))])
    assert (
        measure_on(gpu, monkeypatch, min_rounds=2, max_rounds=2).control == []
        and len(gpu.jobs) == 2
    )
    off = _Children([(FIRST, SECOND)])
    assert (
        measure_on(off, monkeypatch, min_rounds=2, max_rounds=2, order_control_rounds=0).control
        == []
    )
    assert len(off.jobs) == 2


def test_real_a_a_children_time_the_baseline_in_both_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPU has no events, so no win is host-decided there; forced, the A/A rounds run
    as real paired children through the cascade and come back with both slots timed."""
    import gates.cascade as cascade
    from gates.cascade import verify_candidate
    from gates.runner import fast_launch

    problem = Path(__file__).parents[1] / "problems" / "gates" / "swish_bias.py"
    candidate = tmp_path / "identity.py"
    candidate.write_text(problem.read_text() + "\n\nModelNew = Model\n")
    measured: list[PerfMeasurement] = []

    def keep(*args: Any, **kwargs: Any) -> PerfMeasurement:
        measured.append(measure(*args, **kwargs))
        return measured[-1]

    monkeypatch.setattr(perf, "host_decided_win", lambda m, gamma: True)
    monkeypatch.setattr(cascade, "measure", keep)
    settings = GateSettings(device="cpu", baseline_mode="eager", min_rounds=1, max_rounds=1)
    with fast_launch("cpu"):  # children forked from a zygote, as in a worker
        result = verify_candidate(problem, candidate, settings, workdir=tmp_path / "work")
    assert result.accepted, result.reason
    (m,) = measured
    assert len(m.control) == 1 and m.control[0].baseline is not None
    assert m.primary(m.control[0]) > 0 and m.primary(m.control[0].baseline) > 0
    assert control_ratio(m) is not None


class _ScriptedRounds:
    """Paired rounds answered in turn from ``rounds``; A/A rounds (the baseline in both
    slots) from ``control``."""

    def __init__(
        self,
        rounds: list[tuple[TimingResult, TimingResult]],
        control: tuple[TimingResult, TimingResult],
    ) -> None:
        self.rounds, self.control, self.jobs = rounds, control, []

    def __call__(self, job: TimingJob, workdir: Path, **_: Any) -> ChildOutcome:
        self.jobs.append(job)
        if job.model == BASE:
            first, second = self.control
        else:
            timed = sum(1 for j in self.jobs if j.model != BASE)
            first, second = self.rounds[min(timed, len(self.rounds)) - 1]
        result = _paired(first, second).model_dump(mode="json")
        return ChildOutcome(status="ok", phase="save_checks", wall_s=1.0, result=result)


def test_a_win_the_control_takes_back_gets_the_rounds_it_stopped_short_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Host-timed rounds that decide a win stop the rounds; when the order control
    then takes enough of it away that they no longer decide, the rounds go on (to
    ``max_rounds``, then the noisy rounds) and judge the corrected win on all of them
    (the H200 once quarantined an honest kernel at "spread 37% after 2 rounds" this way)."""
    cand = _side(0.010, 0.040)
    rounds = [(_side(0.020, ms), cand) for ms in (0.085, 0.060, 0.060, 0.053)]
    rounds += [(_side(0.020, 0.060), cand)] * 6
    children = _ScriptedRounds(rounds, control=(FIRST, SECOND))
    m = measure_on(children, monkeypatch, min_rounds=2, max_rounds=6, noisy_rounds=4)
    # the rounds stopped at four (the extremes kept all read a win, the slowest at 1.33x)
    assert len(m.control) == 2
    # the correction (1.30x) leaves the 0.053-ms round matched: the rounds go on until
    # ten let both outliers go, and the rounds kept (0.060 ms against 0.052) give a win
    assert len(m.candidate) == 10
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=6, noisy_rounds=4)
    v, category, speedup = perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)
    assert v.status == GateStatus.PASS and category == PerfCategory.OPTIMIZED, v.reason
    assert speedup == pytest.approx(0.060 / (0.040 * 0.056 / 0.043), rel=0.01)


def test_a_win_the_control_leaves_decided_stops_where_it_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cand = _side(0.010, 0.020)  # 3x by the host clock: the 1.3x slot order cannot undo it
    children = _ScriptedRounds([(_side(0.020, 0.060), cand)], control=(FIRST, SECOND))
    m = measure_on(children, monkeypatch, min_rounds=2, max_rounds=6)
    # two processes (the host clock never decides in one), then no round more
    assert len(m.candidate) == 2 and len(m.control) == 2


class _ControlSequence(_ScriptedRounds):
    """As ``_ScriptedRounds``, the A/A rounds answered in turn from a list (the last repeats),
    each one's workdir kept."""

    def __init__(
        self,
        rounds: list[tuple[TimingResult, TimingResult]],
        controls: list[tuple[TimingResult, TimingResult]],
    ) -> None:
        super().__init__(rounds, control=controls[0])
        self.controls, self.control_dirs = controls, []

    def __call__(self, job: TimingJob, workdir: Path, **kwargs: Any) -> ChildOutcome:
        if job.model == BASE:
            self.control = self.controls[min(len(self.control_dirs), len(self.controls) - 1)]
            self.control_dirs.append(workdir.name)
        return super().__call__(job, workdir, **kwargs)


# three rounds of an identity whose second slot reads 1.12x faster by the host clock
IDENTITY_ROUNDS = [(_side(0.0017, 0.0135), _side(0.0017, 0.0121))] * 3
SLOW_FIRST = (_side(0.0017, 0.020), _side(0.0017, 0.011))  # a rare regime: 1.82x
USUAL = (_side(0.0017, 0.0125), _side(0.0017, 0.0121))  # 1.03x


def _identity_verdict(controls: list[tuple[TimingResult, TimingResult]], monkeypatch):
    children = _ControlSequence(IDENTITY_ROUNDS, controls)
    knobs = {"min_rounds": 3, "max_rounds": 3, "noisy_rounds": 0, "order_control_rounds": 1}
    m = measure_on(children, monkeypatch, **knobs)
    settings = GateSettings(device="cuda", **knobs)
    return children, m, perf_verdict(m, settings=settings, gamma=GAMMA, roofline=None)


def test_a_correction_that_would_call_the_candidate_slower_is_measured_over_as_many_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the H200 two A/A rounds both caught a rare slow first slot (1.81x) that most of ten
    paired rounds missed, and the correction turned an identity into "0.58x slower"; the
    control now takes as many rounds as the candidate had before it may do that."""
    children, m, (v, category, _speedup) = _identity_verdict([SLOW_FIRST, USUAL], monkeypatch)
    assert len(m.control) == len(m.candidate) == 3
    assert children.control_dirs == ["control0", "control1", "control2"]
    assert control_ratio(m) == pytest.approx(0.0125 / 0.0121)
    assert category != PerfCategory.SLOWER, v.reason


def test_a_slot_effect_the_longer_control_confirms_still_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a cap: when every A/A round shows the slot effect, the corrected verdict stands."""
    _children, m, (v, category, _speedup) = _identity_verdict([SLOW_FIRST], monkeypatch)
    assert len(m.control) == 3
    assert category == PerfCategory.SLOWER, v.reason


def test_a_correction_that_only_takes_the_win_away_needs_no_more_control_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    children, m, (v, category, _speedup) = _identity_verdict([USUAL], monkeypatch)
    assert len(m.control) == 1 and children.control_dirs == ["control0"]
    assert category == PerfCategory.OPTIMIZED, v.reason  # 1.116 / 1.033: what is left


def test_a_second_win_of_the_same_baseline_borrows_all_but_one_a_a_round(
    monkeypatch: pytest.MonkeyPatch, fresh_control_pool: Any
) -> None:
    """The A/A rounds are the baseline's and the job's, not a candidate's: a process that
    judges another win on the same reference (batch ``verify``) runs one fresh and is lent
    the rest, and the verdict says which were lent."""
    rounds = [(_side(0.020, 0.060), _side(0.010, 0.040))] * 2  # 1.5x by the host clock
    first = _ScriptedRounds(rounds, control=(FIRST, FIRST))
    m1 = measure_on(first, monkeypatch, min_rounds=2, max_rounds=2)
    assert sum(j.model == BASE for j in first.jobs) == 2 and not m1.control_lent_ages_s
    second = _ScriptedRounds(rounds, control=(FIRST, FIRST))
    m2 = measure_on(second, monkeypatch, min_rounds=2, max_rounds=2)
    assert sum(j.model == BASE for j in second.jobs) == 1  # one run now, one lent
    assert len(m2.control) == 2 and len(m2.control_lent_ages_s) == 1
    assert m2.seconds == pytest.approx(3.0)  # two paired rounds and one A/A child
    settings = GateSettings(device="cuda", min_rounds=2, max_rounds=2)
    v, category, _ = perf_verdict(m2, settings=settings, gamma=GAMMA, roofline=None)
    assert category == PerfCategory.OPTIMIZED
    assert v.metrics["order_control"]["lent_ages_s"] == m2.control_lent_ages_s
    # switched off, or another baseline: every round runs again
    off = _ScriptedRounds(rounds, control=(FIRST, FIRST))
    measure_on(off, monkeypatch, min_rounds=2, max_rounds=2, control_pool=False)
    assert sum(j.model == BASE for j in off.jobs) == 2
    other = _ScriptedRounds(rounds, control=(FIRST, FIRST))
    measure_on(other, monkeypatch, min_rounds=2, max_rounds=2, rep_ms=50.0)
    assert sum(j.model == BASE for j in other.jobs) == 2


def test_a_longer_control_borrows_only_rounds_the_verdict_does_not_hold(
    monkeypatch: pytest.MonkeyPatch, fresh_control_pool: Any
) -> None:
    """The slower-flip re-measure may be lent rounds too, never one the verdict already
    holds (its own, just pooled, or one lent before)."""
    _identity_verdict([SLOW_FIRST, USUAL], monkeypatch)  # pools SLOW_FIRST, USUAL, USUAL
    children, m, (v, category, _speedup) = _identity_verdict([SLOW_FIRST, USUAL], monkeypatch)
    # its own first round read the rare regime; of the two more, one is lent, one run now
    assert children.control_dirs == ["control0", "control1"]
    assert len(m.control) == len(m.candidate) == 3 and len(m.control_lent_ages_s) == 1
    assert len({id(p) for p in m.control_pooled}) == len(m.control_pooled) == 3
    assert category != PerfCategory.SLOWER, v.reason


def test_old_a_a_rounds_are_not_lent() -> None:
    from gates.control_pool import ControlPool

    pool = ControlPool(max_age_s=0.0)
    pool.add("k", ["a", "b"])
    assert pool.lend("k", 2) == []  # older than the limit as soon as it is asked
    young = ControlPool()
    kept = young.add("k", ["a", "b"])
    assert [r.result for r in young.lend("k", 5)] == ["b", "a"]  # newest first
    assert young.lend("k", 5, taken=kept[:1]) == kept[1:]
    assert young.lend("other", 5) == [] and young.lend("k", 0) == []


# the second slot's host clock 4% slower for the same code: a "slower" the slot alone made
SLOW_SECOND = _side(0.0104, 0.056 / 0.96)


def test_a_slower_the_slot_order_made_is_credited_to_a_match() -> None:
    m = PerfMeasurement(baseline=[FIRST, FIRST], candidate=[SLOW_SECOND, SLOW_SECOND])
    _, category, speedup = _verdict(m)
    assert category == PerfCategory.SLOWER and speedup == pytest.approx(0.96)
    m.credit_from = 0.96
    m.control = [_paired(FIRST, SLOW_SECOND), _paired(FIRST, SLOW_SECOND)]
    v, category, speedup = _verdict(m)
    assert v.status == GateStatus.PASS and category == PerfCategory.MATCHED
    assert speedup == pytest.approx(1.0)
    assert "credited to the candidate" in v.reason


def test_a_credit_never_makes_a_win_and_a_faster_control_is_no_credit() -> None:
    m = PerfMeasurement(baseline=[FIRST, FIRST], candidate=[SLOW_SECOND, SLOW_SECOND])
    m.credit_from = 0.96
    m.control = [_paired(FIRST, _side(0.0104, 0.056 / 0.85))]  # a slot 15% slower
    _, category, speedup = _verdict(m)
    assert category == PerfCategory.MATCHED and speedup == pytest.approx(1.0)
    m.control = [_paired(FIRST, SECOND)]  # the second slot reads faster: nothing to credit
    _, category, speedup = _verdict(m)
    assert category == PerfCategory.SLOWER and speedup == pytest.approx(0.96)


def test_measure_runs_the_control_for_a_host_decided_slower_near_the_band_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    near = _Children([(FIRST, SLOW_SECOND)])
    m = measure_on(near, monkeypatch, min_rounds=2, max_rounds=2)
    assert len(m.control) == 2 and m.credit_from == pytest.approx(0.96)
    assert _verdict(m)[1] == PerfCategory.MATCHED
    far = _Children([(FIRST, _side(0.0104, 0.056 / 0.8))])  # 0.8x: no slot effect explains it
    m = measure_on(far, monkeypatch, min_rounds=2, max_rounds=2)
    assert m.control == [] and m.credit_from is None and len(far.jobs) == 2
    gpu = _Children([(_side(0.5, 0.45), _side(0.52, 0.47))])  # the events decide
    m = measure_on(gpu, monkeypatch, min_rounds=2, max_rounds=2)
    assert m.control == [] and m.credit_from is None
