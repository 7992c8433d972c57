"""Timing statistics and the V_perf decision, as pure functions.

The measurement itself (fresh processes, ``do_bench``, host timer) lives in
``gates.jobs.timing`` and ``gates.perf``; this module only turns numbers into
a decision, so the decision rules are unit-tested without a GPU.

Rules (docs/method.md#gates, docs/method.md#outcomes):

* each side's time is the median over rounds of the per-round medians (each
  round a fresh process); the *spread* of a side is (max - min) / median of
  its round medians (one outlier round set aside once there are four) --
  "known" once both sides are below ``spread_target``;
* ``speedup = baseline_ms / candidate_ms``;
* **optimized** iff speedup >= gamma and the win also exceeds the measured
  noise; **matched** iff speedup >= 1 / gamma (within the gamma band, so it
  may replace the baseline); otherwise **slower** (fallback to the baseline);
* a round times both sides in one process, so when the sides' spreads are
  above the limit only because the processes differ (both sides alike), the
  rounds' own ratios (``paired_ratios``) decide, at their spread;
* the decision is **decisive** when the extreme rounds agree on it: the
  slowest candidate round against the fastest baseline round and the other way
  round give the same category.  Noise above the limit only quarantines a
  decision it could flip -- a 50x rewrite of a ~2.7 ms GEMM into a ~40 us
  launch-bound kernel carries 20%+ round spread on the H200, and that spread
  cannot make it slower than the baseline.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kernelopt.contracts.verdicts import PerfCategory


def median(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """Relative spread (max - min) / median; 0 for a single value."""
    if len(values) < 2:
        return 0.0
    mid = median(values)
    if mid <= 0 or math.isnan(mid):
        return float("inf")
    return (max(values) - min(values)) / mid


def trimmed(values: Sequence[float]) -> list[float]:
    """Round medians without the ones farthest from the median: one of four to nine, two of ten or more.

    On the H200 a launch-bound forward (~20 us) can time a fresh process far
    off the others (clocks ramping after an idle gap, a busy host core); a few
    such rounds must not make an otherwise tight measurement "unknown" forever.
    At most a fifth of the rounds is set aside, the same share on both sides.
    """
    if len(values) < 4:
        return list(values)
    mid = median(values)
    by_distance = sorted(range(len(values)), key=lambda i: abs(values[i] - mid))
    keep = set(by_distance[: len(values) - max(1, len(values) // 5)])
    return [v for i, v in enumerate(values) if i in keep]


def paired_ratios(
    baseline_rounds: Sequence[float], candidate_rounds: Sequence[float]
) -> list[float]:
    """Each round's speedup, its baseline over its candidate ([] unless the sides pair up).

    A round times both sides in one fresh process (``gates.jobs.timing``), so what
    that process brings to both alike -- the core it landed on, its clocks --
    divides out of the ratio, however far the processes differ from each other.
    """
    if len(baseline_rounds) != len(candidate_rounds) or min(candidate_rounds, default=0) <= 0:
        return []
    return [b / c for b, c in zip(baseline_rounds, candidate_rounds, strict=True)]


def paired_steady(
    baseline_rounds: Sequence[float], candidate_rounds: Sequence[float], *, limit: float
) -> bool:
    """Two or more rounds whose own speedups agree within ``limit`` (``round_spread``)."""
    ratios = paired_ratios(baseline_rounds, candidate_rounds)
    return len(ratios) >= 2 and round_spread(ratios) <= limit


def noisy_undecided(
    baseline_rounds: Sequence[float],
    candidate_rounds: Sequence[float],
    *,
    gamma: float,
    noise_limit: float,
) -> bool:
    """True while the rounds' noise is above the limit and could still flip the category:
    the only case in which rounds past ``max_rounds`` can change the verdict."""
    if min(len(baseline_rounds), len(candidate_rounds)) < 2:
        return False
    noise = max(round_spread(baseline_rounds), round_spread(candidate_rounds))
    if noise <= noise_limit or paired_steady(baseline_rounds, candidate_rounds, limit=noise_limit):
        return False
    return decisive_category(baseline_rounds, candidate_rounds, gamma=gamma) is None


def round_spread(values: Sequence[float]) -> float:
    """Spread of fresh-process round medians, ignoring one outlier once there are four."""
    return spread(trimmed(values))


def category_of(speedup: float, noise: float, gamma: float) -> PerfCategory:
    """The category rule of the module docstring for one speedup and noise level."""
    if speedup >= gamma and speedup >= 1.0 + noise:
        return PerfCategory.OPTIMIZED
    if speedup >= 1.0 / gamma:
        return PerfCategory.MATCHED
    return PerfCategory.SLOWER


def category_reason(category: PerfCategory, speedup: float, noise: float, gamma: float) -> str:
    """The verdict's first words for a category: the speedup and what it was judged against."""
    if category == PerfCategory.OPTIMIZED:
        return f"{speedup:.3g}x faster (gamma {gamma:g}, noise {noise:.1%})"
    if category == PerfCategory.MATCHED:
        return f"{speedup:.3g}x: within the gamma band of the baseline (noise {noise:.1%})"
    return f"{speedup:.3g}x: slower than the baseline beyond the gamma band ({1 / gamma:.3g})"


def decisive_category(
    baseline_rounds: Sequence[float], candidate_rounds: Sequence[float], *, gamma: float
) -> PerfCategory | None:
    """The median's category if both extremes of the rounds fall in it too, else None.

    Pessimistic: fastest baseline round over slowest candidate round; optimistic:
    the reverse (both over the rounds ``round_spread`` keeps).  If even these
    land in the median's category, more rounds or less noise cannot change it.
    """
    base, cand = trimmed(baseline_rounds), trimmed(candidate_rounds)
    if not base or not cand or min(cand) <= 0 or median(candidate_rounds) <= 0:
        return None
    noise = max(spread(base), spread(cand))
    category = category_of(median(baseline_rounds) / median(candidate_rounds), noise, gamma)
    for extreme in (min(base) / max(cand), max(base) / min(cand)):
        if category_of(extreme, 0.0, gamma) != category:
            return None
    return category


def iqr_rel(values: Sequence[float]) -> float:
    """Inter-quartile range relative to the median: the within-process jitter."""
    if len(values) < 4:
        return spread(values)
    q = statistics.quantiles(values, n=4)
    mid = median(values)
    return (q[2] - q[0]) / mid if mid > 0 else float("inf")


def rounds_sufficient(
    baseline_rounds: Sequence[float],
    candidate_rounds: Sequence[float],
    *,
    min_rounds: int,
    spread_target: float,
    gamma: float | None = None,
    decisive_min_rounds: int = 0,
) -> bool:
    """True once each side has ``min_rounds`` fresh-process medians that agree.

    With ``gamma``, also once the rounds already decide the category whatever
    their spread (from ``decisive_min_rounds`` rounds on, when more): more rounds
    of a 50x win cannot change it, only cost GPU time.
    """
    rounds = min(len(baseline_rounds), len(candidate_rounds))
    if rounds < min_rounds:
        return False
    if (
        gamma is not None
        and rounds >= decisive_min_rounds
        and decisive_category(baseline_rounds, candidate_rounds, gamma=gamma)
    ):
        return True
    return (
        round_spread(baseline_rounds) <= spread_target
        and round_spread(candidate_rounds) <= spread_target
    ) or paired_steady(baseline_rounds, candidate_rounds, limit=spread_target)


@dataclass(frozen=True)
class PerfDecision:
    category: PerfCategory
    speedup: float
    baseline_ms: float
    candidate_ms: float
    baseline_spread: float
    candidate_spread: float
    noise: float  # the larger of the two spreads
    stable: bool  # noise within the noise limit, or too small to flip the category
    reason: str
    decisive: bool = False  # the extreme rounds agree on the category
    # the speedup's interval: fastest baseline round over slowest candidate round, and the
    # reverse (rounds round_spread keeps) -- what the verdict reports beside the median
    speedup_low: float = 0.0
    speedup_high: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["category"] = self.category.value
        return out


def decide_category(
    baseline_rounds: Sequence[float],
    candidate_rounds: Sequence[float],
    *,
    gamma: float,
    noise_limit: float,
) -> PerfDecision:
    """Categorise a measured pair of sides (see module docstring)."""
    base = median(baseline_rounds)
    cand = median(candidate_rounds)
    b_sp = round_spread(baseline_rounds)
    c_sp = round_spread(candidate_rounds)
    noise = max(b_sp, c_sp)
    speedup = base / cand if cand > 0 else float("inf")
    decided = decisive_category(baseline_rounds, candidate_rounds, gamma=gamma)
    # the processes differ (both sides alike) but each round's own ratio is steady: the
    # paired comparison decides, at the ratios' noise
    paired = (
        noise > noise_limit
        and decided is None
        and paired_steady(baseline_rounds, candidate_rounds, limit=noise_limit)
    )
    judged_noise = noise
    if paired:
        ratios = paired_ratios(baseline_rounds, candidate_rounds)
        speedup, judged_noise = median(ratios), round_spread(ratios)
    stable = noise <= noise_limit or decided is not None or paired
    category = category_of(speedup, judged_noise, gamma)
    reason = category_reason(category, speedup, judged_noise, gamma)
    if paired:
        reason += (
            f"; paired rounds: each round's own ratio agrees within {judged_noise:.1%} while "
            f"the rounds' times spread {noise:.1%} (the processes differ, both sides alike)"
        )
    if decided is not None and noise > noise_limit:
        base_kept, cand_kept = trimmed(baseline_rounds), trimmed(candidate_rounds)
        reason += (
            f"; noise above the {noise_limit:.0%} limit cannot change it: every round pair "
            f"gives {min(base_kept) / max(cand_kept):.3g}x to {max(base_kept) / min(cand_kept):.3g}x"
        )
    base_kept, cand_kept = trimmed(baseline_rounds), trimmed(candidate_rounds)
    low = min(base_kept) / max(cand_kept) if cand_kept and max(cand_kept) > 0 else speedup
    high = max(base_kept) / min(cand_kept) if cand_kept and min(cand_kept) > 0 else speedup
    if paired:  # the interval of the rounds' own ratios
        kept = trimmed(paired_ratios(baseline_rounds, candidate_rounds))
        low, high = min(kept), max(kept)
    return PerfDecision(
        category,
        speedup,
        base,
        cand,
        b_sp,
        c_sp,
        noise,
        stable,
        reason,
        decided is not None,
        low,
        high,
    )


@dataclass(frozen=True)
class TimerAgreement:
    event_ms: float | None
    host_ms: float
    agree: bool
    reason: str


def timers_agree(
    event_ms: float | None, host_ms: float, *, rel: float, abs_ms: float
) -> TimerAgreement:
    """Say when the host timer reads well above the CUDA events, and why that matters.

    Dispatch-bound forwards and work launched on a side stream hide from events
    recorded on the current stream but not from a device-wide synchronise.  The gate
    times every call by the larger of the two (``PerfMeasurement.primary``), so this
    only explains the verdict; a little excess (one sync per batch) is not reported.
    """
    if event_ms is None:
        return TimerAgreement(None, host_ms, True, "no event timer on this device")
    excess = host_ms - event_ms
    if excess > max(rel * event_ms, abs_ms):
        return TimerAgreement(
            event_ms,
            host_ms,
            False,
            f"CUDA events say {event_ms:.4g} ms, the device-synchronised host timer "
            f"{host_ms:.4g} ms: dispatch-bound, or work on another stream",
        )
    return TimerAgreement(event_ms, host_ms, True, "timers agree")


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """First and third quartile (the extremes below four values)."""
    if len(values) < 4:
        return (min(values), max(values)) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


CI_COVERAGE = 0.95  # the session medians' interval must hold the true median this often
CI_MIN_SESSIONS = 6  # the fewest sessions whose range already reaches CI_COVERAGE


def median_interval(values: Sequence[float], coverage: float = CI_COVERAGE) -> tuple[float, float]:
    """A distribution-free confidence interval of the median: two order statistics.

    The k-th smallest and k-th largest of n values hold the median with probability
    1 - 2 P(Binomial(n, 1/2) < k); k is the largest that keeps ``coverage`` (1: the
    range, below ``CI_MIN_SESSIONS`` values the range covers less than that).
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return float("nan"), float("nan")
    k = 1
    while k < n // 2 and 1.0 - 2.0 * _binomial_below(n, k + 1) >= coverage:
        k += 1
    return ordered[k - 1], ordered[n - k]


def _binomial_below(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) < k)."""
    return sum(math.comb(n, i) for i in range(k)) / 2.0**n


def turn_decision(
    sessions: Sequence[Sequence[float]],
    baseline_turns: Sequence[float],
    candidate_turns: Sequence[float],
    *,
    gamma: float,
    noise_limit: float,
) -> PerfDecision:
    """The category from turn sessions' pair ratios (``gates.turns``), one list a session.

    A session -- one fresh pair of processes -- is the unit of evidence: adjacent
    turns cancel the host clock's regimes, but each pair of processes keeps an
    offset of its own (docs/TEAM_NOTES.md, twentieth session), so pairs pooled over
    sessions would count one process's luck many times.  The speedup is the median
    of the sessions' medians.

    With ``CI_MIN_SESSIONS`` sessions or more, the noise is the width of the median's
    confidence interval over the session medians (``median_interval``), and the
    decision is decisive when both ends of that interval fall in its category: each
    session median already averages its pairs, so their spread is the estimate's
    uncertainty, offsets included, and one more session can only narrow it.  With
    fewer, an interval would cover too little: the noise is then the larger of the
    pairs' interquartile range within a session (``iqr_rel``: a regime change lands
    inside a few pairs) and the spread of all session medians, and decisive means the
    pooled pairs' quartiles and every session median fall in the median's category.
    Stable when decisive or the noise is within ``noise_limit``.
    """
    kept = [list(s) for s in sessions if s]
    medians = [median(s) for s in kept]
    pooled = [x for s in kept for x in s]
    speedup = median(medians) if medians else float("nan")
    low, high = quartiles(pooled)
    if len(medians) >= CI_MIN_SESSIONS:
        ci_low, ci_high = median_interval(medians)
        noise = (ci_high - ci_low) / speedup if speedup > 0 else float("inf")
        edges: tuple[float, ...] = (ci_low, ci_high)
    else:
        within = median([iqr_rel(s) for s in kept]) if kept else float("inf")
        between = spread(medians) if len(medians) >= 2 else 0.0
        noise = max(within, between)
        edges = (low, high, *medians)
    category = category_of(speedup, noise, gamma)
    decisive = bool(pooled) and all(category_of(q, 0.0, gamma) == category for q in edges)
    stable = noise <= noise_limit or decisive
    reason = category_reason(category, speedup, noise, gamma)
    reason += (
        f"; turns: {len(pooled)} pairs of alternating turns in {len(kept)} session(s), "
        f"middle half of their ratios {low:.3g}x to {high:.3g}x"
    )
    if len(medians) >= 2:
        reason += f", session medians {min(medians):.3g}x to {max(medians):.3g}x"
    if len(medians) >= CI_MIN_SESSIONS:
        reason += f", {CI_COVERAGE:.0%} interval of their median {edges[0]:.3g}x to {edges[1]:.3g}x"
    return PerfDecision(
        category,
        speedup,
        median(baseline_turns),
        median(candidate_turns),
        iqr_rel(baseline_turns),
        iqr_rel(candidate_turns),
        noise,
        stable,
        reason,
        decisive,
        low,
        high,
    )


def turns_sufficient(
    sessions: Sequence[Sequence[float]], *, min_rounds: int, spread_target: float, gamma: float
) -> bool:
    """Turn sessions enough: ``min_rounds`` of them, and pair ratios that agree or decide."""
    if len(sessions) < min_rounds or not any(sessions):
        return False
    decision = turn_decision(sessions, [1.0], [1.0], gamma=gamma, noise_limit=spread_target)
    return decision.noise <= spread_target or decision.decisive
