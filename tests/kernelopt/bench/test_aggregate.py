"""Aggregation math: geomeans with unsolved at 1.0x, fast_p, buckets, Amdahl."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from kernelopt.bench.aggregate import (
    BELOW_BUCKETS,
    BenchSummary,
    amdahl_ceiling,
    bucket_counts,
    bucket_of,
    effective_speedup,
    fast_p,
    geomean,
    required_speedup,
    summarize,
)
from kernelopt.bench.results import ProblemResult
from tests.support.bench_outcomes import outcome


def test_geomean_basic_and_empty() -> None:
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)
    assert geomean([2.0, 8.0, 4.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_unsolved_count_at_one_whatever_they_record() -> None:
    # a fallback that recorded a measured 3x must still count 1.0x: the baseline was returned
    outs = [
        outcome("a", "optimized", 4.0),
        outcome("b", "fallback", 3.0),
        outcome("c", "synthesis_failure", 0.5),
    ]
    assert [effective_speedup(o) for o in outs] == [4.0, 1.0, 1.0]
    s = summarize([ProblemResult(level=1, name=o.problem, outcome=o) for o in outs])
    assert s.overall.geomean == pytest.approx(4.0 ** (1 / 3))
    assert s.overall.optimized_geomean == pytest.approx(4.0)
    assert s.overall.pass_rate == pytest.approx(1 / 3)


def test_optimized_only_geomean_excludes_matched() -> None:
    outs = [
        outcome("a", "optimized", 4.0),
        outcome("b", "optimized", 1.5),
        outcome("c", "matched", 1.01),
        outcome("d", "matched", 0.99),
    ]
    s = summarize([ProblemResult(level=2, name=o.problem, outcome=o) for o in outs]).overall
    assert s.optimized_geomean == pytest.approx(math.sqrt(6.0))
    assert s.solved_geomean == pytest.approx((4.0 * 1.5 * 1.01 * 0.99) ** 0.25)
    assert s.geomean == pytest.approx(s.solved_geomean)
    assert s.pass_rate == 1.0


def test_fast_p_is_strict_and_needs_correctness() -> None:
    outs = [
        outcome("a", "optimized", 2.0),
        outcome("b", "optimized", 1.03),
        outcome("c", "matched", 1.02),
        outcome("d", "fallback", 5.0),
        outcome("e", "matched", 1.0),
    ]
    assert fast_p(outs, 1.0) == pytest.approx(3 / 5)  # 2.0, 1.03, 1.02; 1.0 is not > 1.0
    assert fast_p(outs, 1.03) == pytest.approx(1 / 5)  # only 2.0: 1.03 is not > 1.03
    assert fast_p(outs, 1.5) == pytest.approx(1 / 5)
    assert fast_p(outs, 2.0) == 0.0  # the fallback's 5x never counts
    assert fast_p([], 1.0) is None


@pytest.mark.parametrize(
    ("speedup", "bucket"),
    [
        (88.6, ">=10x"),
        (10.0, ">=10x"),
        (9.99, "5-10x"),
        (5.0, "5-10x"),
        (2.0, "2-5x"),
        (1.99, "1.5-2x"),
        (1.5, "1.5-2x"),
        (1.1, "1.1-1.5x"),
        (1.0999, "1.01-1.1x"),
        (1.01, "1.01-1.1x"),
        (1.0099, BELOW_BUCKETS),
        (0.8, BELOW_BUCKETS),
    ],
)
def test_bucket_edges(speedup: float, bucket: str) -> None:
    assert bucket_of(speedup) == bucket


def test_bucket_counts_keep_every_bucket() -> None:
    counts = bucket_counts([12.0, 3.0, 3.5, 1.0])
    assert list(counts) == [">=10x", "5-10x", "2-5x", "1.5-2x", "1.1-1.5x", "1.01-1.1x", "<1.01x"]
    assert counts == {
        ">=10x": 1,
        "5-10x": 0,
        "2-5x": 2,
        "1.5-2x": 0,
        "1.1-1.5x": 0,
        "1.01-1.1x": 0,
        "<1.01x": 1,
    }


def test_amdahl_matches_the_spec_examples() -> None:
    # f = 99%: even S = 100 gives ~1.01x, below the 1.03 gate
    assert amdahl_ceiling(0.99, 100.0) == pytest.approx(1 / (0.99 + 0.01 / 100))
    assert amdahl_ceiling(0.99, 100.0) < 1.03
    assert amdahl_ceiling(0.5, 2.0) == pytest.approx(4 / 3)
    assert amdahl_ceiling(0.5) == pytest.approx(2.0)
    assert amdahl_ceiling(0.0, 10.0) == pytest.approx(10.0)
    assert math.isinf(amdahl_ceiling(0.0))
    assert amdahl_ceiling(1.0, 1e9) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        amdahl_ceiling(1.5)
    with pytest.raises(ValueError):
        amdahl_ceiling(0.5, 0.0)


def test_required_speedup_matches_the_spec_examples() -> None:
    assert required_speedup(0.95) == pytest.approx(2.4, abs=0.01)
    assert required_speedup(0.97) == pytest.approx(34.3, abs=0.1)
    assert required_speedup(0.98) is None  # beyond 1/gamma ~ 97.1%: impossible
    # reaching exactly gamma with the required S, by construction
    s = required_speedup(0.6)
    assert s is not None and amdahl_ceiling(0.6, s) == pytest.approx(1.03)


def _results() -> list[ProblemResult]:
    return [
        ProblemResult(
            level=1,
            name="a",
            outcome=outcome("a", "optimized", 8.0, f=0.0, gpu_seconds=10, tokens=100),
        ),
        ProblemResult(
            level=1,
            name="b",
            outcome=outcome("b", "fallback", 1.0, f=0.99, gpu_seconds=5, tokens=50),
        ),
        ProblemResult(
            level=2,
            name="c",
            outcome=outcome("c", "matched", 1.02, f=0.5, gpu_seconds=1.5, tokens=7),
        ),
        ProblemResult(level=2, name="d", outcome=outcome("d", "synthesis_failure", 1.0, tokens=3)),
    ]


def test_summarize_per_level_and_overall() -> None:
    now = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    s = summarize(_results(), now=now)
    assert [lv.label for lv in s.levels] == ["level1", "level2"]
    l1, l2 = s.levels
    assert l1.counts == {"optimized": 1, "matched": 0, "synthesis_failure": 0, "fallback": 1}
    assert l2.counts == {"optimized": 0, "matched": 1, "synthesis_failure": 1, "fallback": 0}
    assert l1.geomean == pytest.approx(math.sqrt(8.0))
    assert l2.geomean == pytest.approx(math.sqrt(1.02))
    assert s.overall.geomean == pytest.approx((8.0 * 1.02) ** 0.25)
    assert s.overall.problems == 4
    assert s.overall.gpu_seconds == pytest.approx(16.5)
    assert s.overall.tokens == 160
    assert l1.tokens == 150
    assert s.overall.mean_library_fraction == pytest.approx((0.0 + 0.99 + 0.5) / 3)
    assert s.overall.fast_p == {"1.0": 0.5, "1.03": 0.25, "1.5": 0.25, "2.0": 0.25}
    assert s.baseline_mode == "max-autotune-no-cudagraphs"
    assert s.gpu_names == ["NVIDIA H200"]
    assert s.generated_at == "2026-01-02 03:04 UTC"


def test_problem_rows_carry_f_and_ceilings() -> None:
    rows = {r.name: r for r in summarize(_results()).problems}
    assert rows["b"].library_fraction == 0.99
    assert rows["b"].ceiling == pytest.approx(1 / 0.99)
    assert rows["b"].ceiling_10 == pytest.approx(1 / (0.99 + 0.001))
    assert rows["b"].required_speedup is None
    assert rows["c"].required_speedup == pytest.approx(0.5 / (1 / 1.03 - 0.5))
    assert math.isinf(rows["a"].ceiling)
    assert rows["d"].library_fraction is None and rows["d"].ceiling is None
    assert rows["b"].speedup == 1.0 and rows["a"].gpu_seconds == 10


def test_single_kernel_problems_keep_their_f_but_have_no_ceiling() -> None:
    from kernelopt.contracts.compiled import SearchMode

    # diag(a) @ B: f = 0.994 measured, yet the whole forward was replaced (69x on the H200)
    single = outcome("diag", "optimized", 69.7, f=0.994).model_copy(
        update={"mode": SearchMode.SINGLE}
    )
    multi = outcome("gemm_epilogue", "fallback", 1.0, f=0.994)
    rows = {
        r.name: r
        for r in summarize(
            [ProblemResult(level=1, name=o.problem, outcome=o) for o in (single, multi)]
        ).problems
    }
    assert rows["diag"].single_kernel and rows["diag"].library_fraction == 0.994
    assert math.isinf(rows["diag"].ceiling)
    assert rows["diag"].required_speedup == pytest.approx(1.03)
    assert not rows["gemm_epilogue"].single_kernel
    assert rows["gemm_epilogue"].ceiling == pytest.approx(1 / 0.994)


def test_mixed_baseline_modes_are_flagged() -> None:
    results = [
        ProblemResult(
            level=1, name="a", outcome=outcome("a", "matched", 1.0, compile_mode="default")
        ),
        ProblemResult(level=1, name="b", outcome=outcome("b", "matched", 1.0)),
    ]
    assert summarize(results).baseline_mode.startswith("MIXED")


def test_summary_json_round_trip_keeps_infinite_ceiling() -> None:
    s = summarize(_results())
    back = BenchSummary.model_validate_json(s.model_dump_json())
    assert back == s
    assert math.isinf(next(r for r in back.problems if r.name == "a").ceiling)


def test_empty_results_summarize_to_nothing() -> None:
    s = summarize([])
    assert s.levels == [] and s.overall.problems == 0
    assert s.overall.geomean is None and s.overall.pass_rate is None
    assert s.baseline_mode == "unknown"


def test_a_problems_row_names_the_families_behind_its_replacements() -> None:
    from kernelopt.bench.report import problem_table

    won = outcome("a", "optimized", 1.4).model_copy(
        update={"replaced": ["k0", "k1", "k2"], "replaced_by": ["template", "regen", "template"]}
    )
    s = summarize([ProblemResult(level=1, name="a", outcome=won)])
    assert s.problems[0].families == ["regen", "template"]
    head, rows = problem_table(s)
    assert rows[0][head.index("family")] == "regen, template"
