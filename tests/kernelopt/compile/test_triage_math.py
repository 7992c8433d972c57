"""Amdahl arithmetic and verdicts (docs/method.md#ceiling), on synthetic timings."""

from __future__ import annotations

import math

import pytest

from kernelopt.compile.triage import ceiling, ceilings, required_speedup, summarize, verdict
from kernelopt.contracts.compiled import KernelTiming, SearchMode, SearchTarget, TargetKind


def test_ceiling_formula() -> None:
    assert ceiling(0.5, 2.0) == pytest.approx(1 / (0.5 + 0.25))
    assert ceiling(0.99, 100.0) == pytest.approx(1 / (0.99 + 0.01 / 100))
    assert (
        ceiling(0.99, 100.0) < 1.03
    )  # docs/method.md#ceiling: f = 99% and S = 100 stays below the gate
    assert ceiling(0.25, math.inf) == pytest.approx(4.0)
    assert set(ceilings(0.5)) == {"2", "5", "10", "inf"}
    assert math.isfinite(ceilings(0.0)["inf"])  # JSON has no infinity


@pytest.mark.parametrize(("f", "want"), [(0.95, 2.4), (0.97, 34.3)])
def test_required_speedup_matches_spec(f: float, want: float) -> None:
    assert required_speedup(f, 1.03) == pytest.approx(want, abs=0.05)


def test_required_speedup_impossible_beyond_one_over_gamma() -> None:
    assert required_speedup(1 / 1.03 + 1e-6, 1.03) is None
    assert required_speedup(1.0, 1.03) is None
    assert required_speedup(0.0, 1.03) == pytest.approx(1.03)


def test_verdicts() -> None:
    assert verdict(0.5, 1.03, 10.0, SearchMode.MULTI)[0] == "worth_searching"
    assert verdict(0.99, 1.03, 10.0, SearchMode.MULTI)[0] == "library_dominated"
    label, reason, need = verdict(0.968, 1.03, 10.0, SearchMode.MULTI)
    assert label == "library_dominated" and need is not None and need > 10
    assert "10x" in reason
    # single-kernel mode: nothing is frozen, so f does not limit the search
    assert verdict(0.999, 1.03, 10.0, SearchMode.SINGLE)[0] == "worth_searching"


def test_summarize_ranks_targets_by_share() -> None:
    per = [
        KernelTiming(name="cublas_gemm", ms=6.0, is_library=True),
        KernelTiming(name="k_small", ms=1.0, is_library=False),
        KernelTiming(name="k_big", ms=3.0, is_library=False),
    ]
    targets = [
        SearchTarget(id="k_small", kind=TargetKind.KERNEL, kernels=["k_small"]),
        SearchTarget(id="k_big", kind=TargetKind.KERNEL, kernels=["k_big"]),
        SearchTarget(id="group0", kind=TargetKind.FUSION_GROUP, kernels=["k_small", "k_big"]),
    ]
    result = summarize(per, targets, SearchMode.MULTI)
    assert result.library_fraction == pytest.approx(0.6)
    assert result.triton_ms == pytest.approx(4.0)
    assert [t.id for t in result.targets] == ["group0", "k_big", "k_small"]
    assert result.targets[0].share == pytest.approx(0.4)
    assert result.ceilings["inf"] == pytest.approx(1 / 0.6)
    assert result.verdict == "worth_searching"
    assert result.per_kernel[0].name == "cublas_gemm"
