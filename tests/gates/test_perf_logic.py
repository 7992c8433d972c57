"""V_perf decision logic and the roofline, as pure functions."""

from __future__ import annotations

import pytest

from gates.perfstats import (
    decide_category,
    decisive_category,
    noisy_undecided,
    round_spread,
    rounds_sufficient,
    spread,
    timers_agree,
    trimmed,
)
from gates.protocol import TimingResult
from kernelopt.contracts.verdicts import PerfCategory
from kernelopt.roofline import ceilings_for, roofline_check


def test_spread_is_relative_range() -> None:
    assert spread([1.0]) == 0.0
    assert spread([1.0, 1.1, 0.9]) == pytest.approx(0.2)


def test_one_outlier_round_is_set_aside_only_from_four_rounds() -> None:
    cold_first = [0.0300, 0.0207, 0.0208, 0.0206]
    assert round_spread(cold_first) == pytest.approx((0.0208 - 0.0206) / 0.0207)
    assert round_spread(cold_first[:3]) == spread(cold_first[:3]) > 0.4
    # two bad rounds in four are not noise to discard: still unknown
    assert round_spread([0.030, 0.031, 0.0207, 0.0206]) > 0.4
    assert rounds_sufficient(cold_first, cold_first, min_rounds=2, spread_target=0.03)


def test_rounds_continue_until_the_spread_is_known() -> None:
    assert not rounds_sufficient([1.0], [2.0], min_rounds=2, spread_target=0.03)
    assert rounds_sufficient([1.0, 1.01], [2.0, 2.02], min_rounds=2, spread_target=0.03)
    assert not rounds_sufficient([1.0, 1.2], [2.0, 2.0], min_rounds=2, spread_target=0.03)


@pytest.mark.parametrize(
    ("base", "cand", "category"),
    [
        ([1.0, 1.0], [0.5, 0.5], PerfCategory.OPTIMIZED),
        ([1.0, 1.0], [0.98, 0.98], PerfCategory.MATCHED),  # 1.02x < gamma
        ([1.0, 1.0], [1.02, 1.02], PerfCategory.MATCHED),  # within 1/gamma
        ([1.0, 1.0], [1.1, 1.1], PerfCategory.SLOWER),
    ],
)
def test_categories(base: list[float], cand: list[float], category: PerfCategory) -> None:
    assert decide_category(base, cand, gamma=1.03, noise_limit=0.1).category == category


def test_a_win_inside_the_noise_is_not_optimized() -> None:
    d = decide_category([1.0, 1.2], [0.95, 0.95], gamma=1.03, noise_limit=0.3)
    assert d.speedup > 1.03 and d.category == PerfCategory.MATCHED


def test_noise_beyond_the_limit_is_unstable() -> None:
    d = decide_category([1.0, 1.5], [1.0, 1.0], gamma=1.03, noise_limit=0.1)
    assert not d.stable and not d.decisive


# Gate 4's six fresh-process rounds, H200 2026-11-29 (campaign 023_diag_matmul-228e28b9,
# which quarantined this 51x rewrite over its 24% spread): Inductor's GEMM, the row scale.
DIAG_BASE = [2.68758, 2.69008, 2.68838, 2.68698, 2.68717, 2.68715]
DIAG_CAND = [0.050464, 0.055744, 0.059776, 0.046528, 0.055008, 0.037760]


def test_noise_that_cannot_flip_a_huge_win_does_not_quarantine_it() -> None:
    d = decide_category(DIAG_BASE, DIAG_CAND, gamma=1.03, noise_limit=0.1)
    assert d.noise > 0.1  # really noisy ...
    assert d.decisive and d.stable  # ... but no round comes near the baseline
    assert d.category == PerfCategory.OPTIMIZED
    assert "cannot change it" in d.reason


def test_noise_that_could_flip_the_decision_still_quarantines() -> None:
    # a 1.1x median win whose rounds reach below the gamma band: undecided
    d = decide_category([1.0, 1.0, 1.0], [0.8, 0.91, 1.02], gamma=1.03, noise_limit=0.1)
    assert d.speedup > 1.03 and not d.decisive and not d.stable


def test_a_decisively_slower_candidate_is_slower_whatever_the_noise() -> None:
    d = decide_category([1.0, 1.0, 1.0], [2.0, 2.5, 3.0], gamma=1.03, noise_limit=0.1)
    assert d.decisive and d.stable and d.category == PerfCategory.SLOWER


def test_the_outlier_round_is_set_aside_for_the_extremes_too() -> None:
    # one cold round as slow as the baseline must not undo a clear win from four rounds
    base, cand = [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.52, 1.0]
    assert decisive_category(base, cand, gamma=1.03) == PerfCategory.OPTIMIZED
    assert decisive_category(base[:3], cand[:3], gamma=1.03) == PerfCategory.OPTIMIZED
    assert decisive_category([1.0, 1.0], [0.5, 1.0], gamma=1.03) is None


def test_rounds_stop_early_once_the_extremes_decide() -> None:
    two_b, two_c = DIAG_BASE[:2], DIAG_CAND[:2]
    assert not rounds_sufficient(two_b, two_c, min_rounds=2, spread_target=0.03)
    assert rounds_sufficient(two_b, two_c, min_rounds=2, spread_target=0.03, gamma=1.03)
    assert not rounds_sufficient(two_b[:1], two_c[:1], min_rounds=2, spread_target=0.03, gamma=1.03)


def test_side_stream_signature_disagrees() -> None:
    # events on the current stream see only launch overhead; the device-wide host timer
    # sees the real work
    assert not timers_agree(0.01, 0.6, rel=0.5, abs_ms=0.05).agree
    assert timers_agree(0.60, 0.62, rel=0.5, abs_ms=0.05).agree
    assert timers_agree(0.005, 0.02, rel=0.5, abs_ms=0.05).agree  # Python overhead only
    assert timers_agree(None, 1.0, rel=0.5, abs_ms=0.05).agree


def _diag_check(candidate_ms: float) -> object:
    n = 4096
    h200 = ceilings_for("NVIDIA H200")
    assert h200 is not None
    return roofline_check(
        ceilings=h200,
        bytes_in=n * 4 + n * n * 4,
        bytes_out=n * n * 4,
        candidate_ms=candidate_ms,
        baseline_ms=2.69,
        flops=2 * n**3,
        slack=0.5,
    )


def test_real_70x_algebraic_win_is_not_quarantined() -> None:
    check = _diag_check(2.69 / 70)
    assert not check.below_floor
    assert check.beats_fp32_flops  # fewer FLOPs than the reference: an algebraic rewrite
    assert check.max_plausible_speedup is not None and check.max_plausible_speedup > 70


def test_impossible_1400x_is_quarantined() -> None:
    check = _diag_check(2.69 / 1400)
    assert check.below_floor and "implausible" in check.reason


def test_floor_counts_bytes_at_measured_bandwidth() -> None:
    h200 = ceilings_for("NVIDIA H200")
    assert h200 is not None and h200.copy_bandwidth_gbs == 4300.0
    check = roofline_check(
        ceilings=h200,
        bytes_in=4_300_000_000,
        bytes_out=0,
        candidate_ms=1.0,
        baseline_ms=None,
        flops=None,
        slack=0.5,
    )
    assert check.floor_ms == pytest.approx(1.0)
    assert ceilings_for("Some Unknown GPU") is None
    assert ceilings_for("Some Unknown GPU", 1000.0) is not None


def _round(side: str, ms: float, changed: list[str]) -> object:
    from gates.protocol import TimingResult

    return TimingResult(
        side=side, event_ms=None, event_samples=[ms] * 5, host_ms=ms, tampered_before=changed
    )


def test_only_changes_the_baseline_does_not_show_are_the_candidates() -> None:
    """A switch torch itself flips shows on both sides; the candidate is not failed for it."""
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import perf_verdict
    from kernelopt.contracts.verdicts import GateSettings, GateStatus

    settings = GateSettings(device="cpu", min_rounds=1, max_rounds=1)
    harness = "torch.backends.cudnn.benchmark"
    both = PerfMeasurement(
        baseline=[_round("baseline", 2.0, [harness])],
        candidate=[_round("candidate", 1.0, [harness])],
    )
    v, _, _ = perf_verdict(both, settings=settings, gamma=1.03, roofline=None)
    assert v.status == GateStatus.PASS and v.metrics["changed_by_baseline"] == [harness]
    cheat = "torch.backends.cuda.matmul.allow_tf32"
    own = PerfMeasurement(
        baseline=[_round("baseline", 2.0, [harness])],
        candidate=[_round("candidate", 1.0, [harness, cheat])],
    )
    v, _, _ = perf_verdict(own, settings=settings, gamma=1.03, roofline=None)
    assert v.status == GateStatus.FAIL and v.metrics["tampered"] == [cheat]


def test_a_call_is_timed_by_the_larger_of_events_and_host() -> None:
    """Dispatch-bound forwards (or work on another stream) are timed by the host clock."""
    from gates.perf import PerfMeasurement
    from gates.protocol import TimingResult

    r = TimingResult(side="candidate", event_ms=0.02, event_samples=[0.02, 0.021], host_ms=0.13)
    assert PerfMeasurement.primary(r) == 0.13
    gpu_bound = r.model_copy(update={"event_ms": 0.5, "host_ms": 0.45})
    assert PerfMeasurement.primary(gpu_bound) == 0.5
    cpu = r.model_copy(update={"event_ms": None})
    assert PerfMeasurement.primary(cpu) == 0.0205


def test_a_dispatch_bound_verdict_states_the_gpu_work_alone() -> None:
    """A win that is mostly host time says so: the GPU-only ratio stands beside it."""
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import perf_verdict
    from gates.protocol import TimingResult
    from kernelopt.contracts.verdicts import GateSettings, GateStatus

    def side(name: str, event: float, host: float) -> TimingResult:
        return TimingResult(side=name, event_ms=event, event_samples=[event] * 5, host_ms=host)

    settings = GateSettings(device="cuda", min_rounds=1, max_rounds=1)
    m = PerfMeasurement(
        baseline=[side("baseline", 0.020, 0.060)], candidate=[side("candidate", 0.019, 0.021)]
    )
    v, _, speedup = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert v.status == GateStatus.PASS and speedup == pytest.approx(0.060 / 0.021)
    assert v.metrics["gpu_work"]["speedup"] == pytest.approx(0.020 / 0.019)
    assert "GPU work alone 0.02 -> 0.019 ms (1.05x)" in v.reason
    gpu_bound = PerfMeasurement(
        baseline=[side("baseline", 0.5, 0.45)], candidate=[side("candidate", 0.25, 0.2)]
    )
    v, _, _ = perf_verdict(gpu_bound, settings=settings, gamma=1.03, roofline=None)
    assert v.metrics["gpu_work"]["speedup"] == pytest.approx(2.0)
    assert "GPU work alone" not in v.reason  # both timers agree: the ratio is the GPU's


@pytest.mark.parametrize(
    ("base_first", "cand_first", "memo"),
    [
        (0.02, 0.10, False),  # honest: a new set takes as long as the rotation's
        (0.02, 0.90, True),  # a memo: new values cost the full forward, seen ones a copy
        (0.05, 0.30, False),  # the baseline's new sets are as much slower: the harness's
        # the baseline's samples stalled (its new sets 40x faster): the round judges nothing
        (0.0005, 0.90, False),
    ],
)
def test_a_win_that_holds_only_for_inputs_seen_before_is_memoisation(
    base_first: float, cand_first: float, memo: bool
) -> None:
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import perf_verdict
    from kernelopt.contracts.verdicts import GateSettings, GateStatus

    side = _first_sight_side
    settings = GateSettings(device="cuda", min_rounds=1, max_rounds=2)
    m = PerfMeasurement(
        baseline=[side("baseline", 0.02 * 50, base_first * 50)] * 2,
        candidate=[side("candidate", 0.1, cand_first)] * 2,
    )
    v, category, _ = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert v.metrics["first_sight"]["candidate"] == pytest.approx([cand_first / 0.1] * 2)
    if memo:
        assert v.status == GateStatus.FAIL and category is None
        assert v.reason.startswith("memoised: its calls on input values new to the process")
        assert "cache of earlier answers" in v.feedback
    else:
        assert v.status == GateStatus.PASS and category == PerfCategory.OPTIMIZED


@pytest.mark.parametrize(
    ("base_ms", "base_first", "cand_ms", "cand_first"),
    [
        # two single calls of a 12-us forward are noise (identical CPU code read 1.14x-3.7x):
        # the candidate's new values read 10x its samples, the baseline's samples are short
        (0.5, 0.5, 0.25, 2.5),
        # a tiny candidate forward's new-value calls (20x its samples, yet under the floor)
        # are noise too, however long the baseline's samples: a memo's do the real work
        (20.0, 20.0, 0.02, 0.4),
    ],
)
def test_first_sight_calls_too_short_to_time_alone_decide_nothing(
    base_ms: float, base_first: float, cand_ms: float, cand_first: float
) -> None:
    """Times are in units of ``MEMO_MIN_MS`` (CUDA's)."""
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import MEMO_MIN_MS, perf_verdict
    from kernelopt.contracts.verdicts import GateSettings, GateStatus

    unit = MEMO_MIN_MS["cuda"]
    m = PerfMeasurement(
        baseline=[_first_sight_side("baseline", base_ms * unit, base_first * unit)],
        candidate=[_first_sight_side("candidate", cand_ms * unit, cand_first * unit)],
    )
    settings = GateSettings(device="cuda", min_rounds=1, max_rounds=1)
    v, _, _ = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert v.status == GateStatus.PASS and "first_sight" not in v.metrics


@pytest.mark.parametrize(
    ("cand_ms", "cand_first", "memo"),
    [
        # an honest 5-us forward whose two new-value calls the loaded CPU's scheduler stalled
        # (402x its samples, past MEMO_MIN_MS): a tenth of the baseline's forward, no memo's work
        (0.005, 2.01, False),
        # a memo of the baseline's 20-ms product: copies of 0.6 ms, new values at its cost
        (0.6, 21.0, True),
        # ... its new values read 0.86-1.3x of the baseline's samples: only samples stalled
        # to 3x and more take it under a quarter, and such a baseline's round judges nothing
        (0.6, 6.0, True),
        # a memo around a kernel over 4x faster than the baseline is not judged on the CPU
        # (which claims no speed): its new-value calls are as short as a stalled honest one's
        (0.2, 4.0, False),
    ],
)
def test_on_the_cpu_new_value_calls_under_a_quarter_of_the_baseline_judge_nothing(
    cand_ms: float, cand_first: float, memo: bool
) -> None:
    from gates.perf import PerfMeasurement
    from gates.perf_verdict import MEMO_SHARE, perf_verdict
    from kernelopt.contracts.verdicts import GateSettings, GateStatus

    base_ms = 20.0  # the baseline's samples, its new values 0.983x of them (as in CI)
    m = PerfMeasurement(
        baseline=[_first_sight_side("baseline", base_ms, 0.983 * base_ms)],
        candidate=[_first_sight_side("candidate", cand_ms, cand_first)],
    )
    settings = GateSettings(device="cpu", min_rounds=1, max_rounds=1)
    v, _, _ = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert (cand_first >= MEMO_SHARE["cpu"] * base_ms) is memo
    if memo:
        assert v.status == GateStatus.FAIL and v.reason.startswith("memoised:"), v.reason
        assert v.metrics["first_sight"]["candidate"] == pytest.approx([cand_first / cand_ms])
    else:
        assert v.status == GateStatus.PASS and "first_sight" not in v.metrics, v.reason


def _first_sight_side(name: str, ms: float, first: float) -> TimingResult:
    """One side's timing: nine samples of ``ms``, two new-value calls of ``first``."""
    return TimingResult(
        side=name, event_ms=ms, event_samples=[ms] * 9, first_sight_samples=[first] * 2, host_ms=ms
    )


def test_a_fifth_of_the_rounds_is_set_aside_from_ten_rounds() -> None:
    rounds = [0.66] * 8 + [1.05, 1.10]
    assert trimmed(rounds) == [0.66] * 8
    assert len(trimmed(rounds[:9])) == 8  # one of four to nine
    base = [1.0] * 10
    d = decide_category(base, rounds, gamma=1.03, noise_limit=0.1)
    assert d.category == PerfCategory.OPTIMIZED and d.decisive
    assert noisy_undecided(base, rounds[2:], gamma=1.03, noise_limit=0.1)  # 8: one kept
    assert not noisy_undecided(base, rounds, gamma=1.03, noise_limit=0.1)
    assert not noisy_undecided(base[:1], rounds[:1], gamma=1.03, noise_limit=0.1)


# each round times both sides in one process: a process that is slow for both (its core,
# its clocks) moves both sides alike, and the rounds' own ratios stay put
SLOW_AND_FAST_PROCESSES = [0.050, 0.100, 0.070]


def test_the_same_code_in_slow_and_fast_processes_is_matched_by_the_paired_ratios() -> None:
    same = SLOW_AND_FAST_PROCESSES
    d = decide_category(same, same, gamma=1.03, noise_limit=0.1)
    assert d.noise > 0.5 and not d.decisive  # the sides alone: unknown (was a quarantine)
    assert d.stable and d.category == PerfCategory.MATCHED and d.speedup == pytest.approx(1.0)
    assert "paired rounds" in d.reason
    assert rounds_sufficient(same, same, min_rounds=2, spread_target=0.03)
    assert not noisy_undecided(same, same, gamma=1.03, noise_limit=0.1)


def test_a_real_win_in_noisy_processes_is_decided_by_its_steady_ratios() -> None:
    base = SLOW_AND_FAST_PROCESSES
    cand = [x / 1.5 for x in base]
    d = decide_category(base, cand, gamma=1.03, noise_limit=0.1)
    assert d.stable and d.category == PerfCategory.OPTIMIZED
    assert d.speedup == pytest.approx(1.5) and d.speedup_low == pytest.approx(1.5)


def test_ratios_that_disagree_still_quarantine() -> None:
    base = [0.10, 0.10, 0.10]
    cand = [0.05, 0.10, 0.075]  # 2x, 1x, 1.33x: the candidate itself is unsteady
    d = decide_category(base, cand, gamma=1.03, noise_limit=0.1)
    assert not d.stable and "paired" not in d.reason
    assert noisy_undecided(base, cand, gamma=1.03, noise_limit=0.1)
    assert not rounds_sufficient(base, cand, min_rounds=2, spread_target=0.03)


def test_unpaired_rounds_never_use_the_ratios() -> None:
    d = decide_category([0.05, 0.10], [0.05, 0.10, 0.07], gamma=1.03, noise_limit=0.1)
    assert not d.stable and "paired" not in d.reason
