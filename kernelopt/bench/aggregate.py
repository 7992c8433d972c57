"""The paper-comparable numbers, as pure functions over finished problems.

Conventions (docs/method.md#outcomes), applied here and nowhere else:

* a problem counts as *solved* when its category is ``optimized`` or
  ``matched``; only then does its measured speedup count.  ``fallback`` and
  ``synthesis_failure`` return the compiled baseline, so they count as exactly
  1.0x whatever number the outcome carries;
* geometric means are taken over ALL problems of a level (unsolved at 1.0x);
  the optimised-only geomean is over ``optimized`` problems alone;
* ``fast_p`` is the fraction of problems that are solved AND faster than p;
* the library fraction f comes from the campaign's triage, and the Amdahl
  ceiling ``1 / (f + (1 - f) / S)`` says what the frozen dispatch graph allows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from pydantic import ConfigDict, Field

from kernelopt.compile.triage import frozen_fraction
from kernelopt.contracts import Outcome, OutcomeCategory
from kernelopt.contracts.base import Frozen
from kernelopt.contracts.compiled import SearchMode

from .gpu_cost import GpuCost
from .results import ProblemResult

FAST_P: tuple[float, ...] = (1.0, 1.03, 1.5, 2.0)
GAMMA = 1.03
SOLVED = frozenset({OutcomeCategory.OPTIMIZED, OutcomeCategory.MATCHED})
CATEGORIES: tuple[OutcomeCategory, ...] = tuple(OutcomeCategory)

# The paper's speedup histogram: (label, low inclusive, high exclusive)
BUCKETS: tuple[tuple[str, float, float], ...] = (
    (">=10x", 10.0, math.inf),
    ("5-10x", 5.0, 10.0),
    ("2-5x", 2.0, 5.0),
    ("1.5-2x", 1.5, 2.0),
    ("1.1-1.5x", 1.1, 1.5),
    ("1.01-1.1x", 1.01, 1.1),
)
BELOW_BUCKETS = "<1.01x"

# an Amdahl ceiling at f = 0 is infinite; keep it as "Infinity" in JSON, not null
_JSON_INF = ConfigDict(**Frozen.model_config, ser_json_inf_nan="strings")


def is_solved(outcome: Outcome) -> bool:
    return outcome.category in SOLVED


def effective_speedup(outcome: Outcome) -> float:
    """The speedup a user gets: the measured one if solved, 1.0 when the baseline is returned."""
    return outcome.speedup if is_solved(outcome) else 1.0


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean; None for no values.  Non-positive values are a bug upstream."""
    vals = list(values)
    if not vals:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in vals):
        raise ValueError(f"geomean needs finite positive values, got {vals}")
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))


def fast_p(outcomes: Sequence[Outcome], p: float) -> float | None:
    """Fraction of problems that are solved and strictly faster than ``p``."""
    if not outcomes:
        return None
    hits = sum(1 for o in outcomes if is_solved(o) and effective_speedup(o) > p)
    return hits / len(outcomes)


def bucket_of(speedup: float) -> str:
    for label, low, high in BUCKETS:
        if low <= speedup < high:
            return label
    return BELOW_BUCKETS


def bucket_counts(speedups: Iterable[float]) -> dict[str, int]:
    """Counts per paper bucket (largest first), plus ``<1.01x`` for the rest."""
    counts = {label: 0 for label, _, _ in BUCKETS}
    counts[BELOW_BUCKETS] = 0
    for s in speedups:
        counts[bucket_of(s)] += 1
    return counts


def amdahl_ceiling(f: float, s: float = math.inf) -> float:
    """Model speedup when a fraction ``f`` is frozen and the rest gets ``s`` times faster."""
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"library fraction must be in [0, 1], got {f}")
    if s <= 0:
        raise ValueError(f"speedup must be positive, got {s}")
    denominator = f + (0.0 if math.isinf(s) else (1.0 - f) / s)
    return math.inf if denominator == 0.0 else 1.0 / denominator


def required_speedup(f: float, gamma: float = GAMMA) -> float | None:
    """Triton speedup needed to reach ``gamma`` end to end; None when f makes it impossible."""
    if f >= 1.0 / gamma:
        return None
    return (1.0 - f) / (1.0 / gamma - f)


class ProblemRow(Frozen):
    """One line of the per-problem table."""

    model_config = _JSON_INF

    level: int | None
    name: str
    category: OutcomeCategory
    speedup: float  # effective: 1.0 unless solved
    measured_speedup: float  # as the outcome recorded it
    library_fraction: float | None = None  # measured
    single_kernel: bool = False  # the whole forward was the target: f is not frozen
    ceiling: float | None = None  # Amdahl ceiling at S = inf (f = 0 in single-kernel mode)
    ceiling_10: float | None = None  # at S = 10
    required_speedup: float | None = None  # Triton speedup needed to reach gamma
    baseline_ms: float | None = None
    optimized_ms: float | None = None
    gpu_seconds: float = 0.0
    tokens: int = 0
    usd: float = 0.0
    compile_mode: str = ""
    reason: str = ""
    families: list[str] = Field(default_factory=list)  # behind the kept replacements


class LevelSummary(Frozen):
    """Aggregates over one level (or over everything, label "all")."""

    model_config = _JSON_INF

    label: str
    problems: int
    counts: dict[str, int]  # by OutcomeCategory value, every category present
    geomean: float | None  # all problems, unsolved at 1.0x
    optimized_geomean: float | None  # `optimized` problems only
    solved_geomean: float | None  # `optimized` + `matched`
    pass_rate: float | None  # solved / problems
    fast_p: dict[str, float | None]  # "1.0", "1.03", "1.5", "2.0" -> fraction
    buckets: dict[str, int]
    mean_library_fraction: float | None = None
    gpu_seconds: float = 0.0
    tokens: int = 0
    usd: float = 0.0


class BenchSummary(Frozen):
    """Everything a report shows; JSON-serialisable for docs/results/."""

    model_config = _JSON_INF

    levels: list[LevelSummary]
    overall: LevelSummary
    problems: list[ProblemRow]
    baseline_modes: list[str] = Field(default_factory=list)
    gpu_names: list[str] = Field(default_factory=list)
    torch_versions: list[str] = Field(default_factory=list)
    triton_versions: list[str] = Field(default_factory=list)
    numerics: list[str] = Field(default_factory=list)  # "not recorded" for older outcomes
    gamma: float = GAMMA
    generated_at: str = ""
    suite_problems: int | None = None  # how many the suite has (None: not known)
    search_settings: list[str] = Field(default_factory=list)  # every setting the runs used
    failed: dict[str, str] = Field(default_factory=dict)  # problem key -> its last error
    gpu_cost: GpuCost | None = None  # GPU-seconds per verdict and per problem (issue 22)
    gpu_cost_before: GpuCost | None = None  # the same of an earlier run, to compare

    @property
    def baseline_mode(self) -> str:
        """One mode, or an explicit warning: mixed baselines make the numbers incomparable."""
        if not self.baseline_modes:
            return "unknown"
        if len(self.baseline_modes) == 1:
            return self.baseline_modes[0]
        return "MIXED: " + ", ".join(self.baseline_modes)


def level_label(level: int | None) -> str:
    return "flat" if level is None else f"level{level}"


def problem_row(result: ProblemResult, gamma: float = GAMMA) -> ProblemRow:
    o = result.outcome
    triage = o.triage or o.triage_ref  # both carry f
    f = triage.library_fraction if triage is not None else None
    # single-kernel mode replaces the library call too: nothing is frozen, no ceiling applies
    single = o.mode == SearchMode.SINGLE
    frozen = None if f is None else frozen_fraction(f, o.mode)
    return ProblemRow(
        level=result.level,
        name=result.name,
        category=o.category,
        speedup=effective_speedup(o),
        measured_speedup=o.speedup,
        families=sorted(set(o.replaced_by)),
        library_fraction=f,
        single_kernel=single,
        ceiling=amdahl_ceiling(frozen) if frozen is not None else None,
        ceiling_10=amdahl_ceiling(frozen, 10.0) if frozen is not None else None,
        required_speedup=required_speedup(frozen, gamma) if frozen is not None else None,
        baseline_ms=o.baseline_ms,
        optimized_ms=o.optimized_ms,
        gpu_seconds=o.used.gpu_seconds,
        tokens=o.used.tokens,
        usd=o.used.usd,
        compile_mode=o.compile_mode,
        reason=o.reason,
    )


def summarize_level(label: str, outcomes: Sequence[Outcome]) -> LevelSummary:
    speedups = [effective_speedup(o) for o in outcomes]
    fractions = [t.library_fraction for o in outcomes if (t := o.triage or o.triage_ref)]
    counts = {c.value: sum(1 for o in outcomes if o.category == c) for c in CATEGORIES}
    solved = [o for o in outcomes if is_solved(o)]
    optimized = [o for o in outcomes if o.category == OutcomeCategory.OPTIMIZED]
    return LevelSummary(
        label=label,
        problems=len(outcomes),
        counts=counts,
        geomean=geomean(speedups),
        optimized_geomean=geomean(o.speedup for o in optimized),
        solved_geomean=geomean(o.speedup for o in solved),
        pass_rate=len(solved) / len(outcomes) if outcomes else None,
        fast_p={str(p): fast_p(outcomes, p) for p in FAST_P},
        buckets=bucket_counts(speedups),
        mean_library_fraction=sum(fractions) / len(fractions) if fractions else None,
        gpu_seconds=math.fsum(o.used.gpu_seconds for o in outcomes),
        tokens=sum(o.used.tokens for o in outcomes),
        usd=math.fsum(o.used.usd for o in outcomes),
    )


NUMERICS_NOT_RECORDED = "not recorded (outcomes from before the policy was recorded)"


def _distinct(values: Iterable[str]) -> list[str]:
    """Each value once; with more than one, each says how many problems it covers.

    A suite that straddles a version or policy change must show how much of the
    table each side is, not only that both exist.
    """
    counts = Counter(v for v in values if v)
    if len(counts) < 2:
        return sorted(counts)
    total = sum(counts.values())
    return [f"{counts[v]} of {total} problems: {v}" for v in sorted(counts)]


def summarize(
    results: Sequence[ProblemResult],
    gamma: float = GAMMA,
    now: datetime | None = None,
    suite_problems: int | None = None,
    search_settings: Sequence[str] = (),
    failed: dict[str, str] | None = None,
    gpu_cost: GpuCost | None = None,
    gpu_cost_before: GpuCost | None = None,
) -> BenchSummary:
    """Per-level and overall aggregates plus the per-problem table."""
    ordered = sorted(results, key=lambda r: (r.level if r.level is not None else -1, r.name))
    by_level: dict[int | None, list[Outcome]] = {}
    for r in ordered:
        by_level.setdefault(r.level, []).append(r.outcome)
    outcomes = [r.outcome for r in ordered]
    return BenchSummary(
        levels=[summarize_level(level_label(lvl), outs) for lvl, outs in by_level.items()],
        overall=summarize_level("all", outcomes),
        problems=[problem_row(r, gamma) for r in ordered],
        baseline_modes=_distinct(o.compile_mode for o in outcomes),
        gpu_names=_distinct(o.gpu_name for o in outcomes),
        torch_versions=_distinct(o.torch_version for o in outcomes),
        triton_versions=_distinct(o.triton_version for o in outcomes),
        numerics=_distinct(o.numerics or NUMERICS_NOT_RECORDED for o in outcomes),
        gamma=gamma,
        generated_at=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        suite_problems=suite_problems,
        search_settings=list(dict.fromkeys(search_settings)),
        failed=dict(failed or {}),
        gpu_cost=gpu_cost,
        gpu_cost_before=gpu_cost_before,
    )
