"""Triage's headroom rule: a target its bandwidth cannot carry to gamma is searched last.

Synthetic times and floors at 1000 GB/s (1 ms moves 1e9 bytes), gamma 1.03: a
target holding 60% of the forward needs 1.051x, one holding 10% needs 1.410x.
"""

from __future__ import annotations

import pytest

from kernelopt.agents.facts import build_facts
from kernelopt.compile.triage import floor_bytes_by_target, summarize
from kernelopt.contracts.compiled import KernelTiming, SearchMode, SearchTarget, TargetKind
from tests.support.recorded_results import recorded_results

BANDWIDTH = 1000.0  # GB/s
GB = 10**9


def _timings() -> list[KernelTiming]:
    return [
        KernelTiming(name="cublas_gemm", ms=3.0, is_library=True),
        KernelTiming(name="k_big", ms=6.0, is_library=False),  # 60% of the forward
        KernelTiming(name="k_small", ms=1.0, is_library=False),  # 10%
    ]


def _targets() -> list[SearchTarget]:
    return [
        SearchTarget(id=name, kind=TargetKind.KERNEL, kernels=[name])
        for name in ("k_small", "k_big")
    ]


def _summarize(floors: dict[str, int], bandwidth: float | None = BANDWIDTH):
    return summarize(
        _timings(),
        _targets(),
        SearchMode.MULTI,
        floor_bytes=floors,
        bandwidth_gbs=bandwidth,
    )


def test_a_big_target_without_headroom_is_searched_after_a_smaller_one_with_it() -> None:
    # k_big runs at 98% of the bandwidth (1.02x headroom, needs 1.051x); k_small at 7%
    result = _summarize({"k_big": int(5.88 * GB), "k_small": int(0.07 * GB)})
    assert [t.id for t in result.targets] == ["k_small", "k_big"]
    assert result.targets[1].share == pytest.approx(0.6)  # its share is kept, only its place moves
    rooms = {r.target: r for r in result.headroom}
    big, small = rooms["k_big"], rooms["k_small"]
    assert big.short and not small.short
    assert big.headroom == pytest.approx(6.0 / 5.88)
    assert big.required == pytest.approx(0.6 / (1 / 1.03 - 0.4))
    assert big.reason == (
        "bandwidth headroom 1.02x (98% of peak) < required 1.051x: cannot reach gamma = 1.03 "
        "without moving fewer bytes"
    )
    assert small.headroom == pytest.approx(1.0 / 0.07) and small.reason == ""
    assert "1 of the 2 targets" in result.headroom_rule and "1000 GB/s" in result.headroom_rule


def test_when_no_target_has_headroom_the_share_order_stands() -> None:
    result = _summarize({"k_big": int(5.88 * GB), "k_small": int(0.95 * GB)})
    assert [t.id for t in result.targets] == ["k_big", "k_small"]
    assert all(r.short for r in result.headroom)


@pytest.mark.parametrize("bandwidth", [None, 0.0])
def test_an_unknown_bandwidth_keeps_the_share_order_and_says_so(bandwidth) -> None:
    result = _summarize({"k_big": int(5.88 * GB), "k_small": int(0.07 * GB)}, bandwidth)
    assert [t.id for t in result.targets] == ["k_big", "k_small"]
    assert result.headroom == []
    assert "peak bandwidth is unknown" in result.headroom_rule


def test_a_target_too_small_to_reach_gamma_alone_is_not_judged() -> None:
    # 1% of the forward: no speedup of it alone reaches gamma, so bandwidth says nothing new
    per = [*_timings(), KernelTiming(name="k_tiny", ms=0.1, is_library=False)]
    targets = [*_targets(), SearchTarget(id="k_tiny", kind=TargetKind.KERNEL, kernels=["k_tiny"])]
    floors = {"k_big": int(5.88 * GB), "k_small": int(0.07 * GB), "k_tiny": int(0.099 * GB)}
    result = summarize(
        per, targets, SearchMode.MULTI, floor_bytes=floors, bandwidth_gbs=BANDWIDTH, coverage=1.0
    )
    assert [t.id for t in result.targets] == ["k_small", "k_tiny", "k_big"]
    assert "k_tiny" not in {r.target for r in result.headroom}


def test_the_cut_off_keeps_its_targets_and_the_deferred_ones_are_ordered_alike() -> None:
    """The rule orders what the cut-off chose; it neither adds nor removes a searched target."""
    per = [KernelTiming(name=f"k{i}", ms=ms, is_library=False) for i, ms in enumerate([5, 4, 1])]
    targets = [
        SearchTarget(id=f"k{i}", kind=TargetKind.KERNEL, kernels=[f"k{i}"]) for i in range(3)
    ]
    # shares 50%, 40%, 10%; with coverage 0.5 only k0 is searched
    near = {f"k{i}": int(ms * 0.99 * GB) for i, ms in enumerate([5, 4, 1])}
    near["k2"] = int(0.1 * GB)
    result = summarize(
        per, targets, SearchMode.MULTI, coverage=0.5, floor_bytes=near, bandwidth_gbs=BANDWIDTH
    )
    assert [t.id for t in result.targets] == ["k0"]
    assert result.deferred_targets == ["k2", "k1"]


def test_the_forward_target_needs_gamma_of_itself() -> None:
    """Single-kernel mode: share 1, so the forward needs gamma; its floor is passed like any."""
    forward = SearchTarget(id="forward", kind=TargetKind.FORWARD, kernels=["k_big", "k_small"])
    result = summarize(
        _timings(),
        [forward],
        SearchMode.SINGLE,
        floor_bytes={"forward": int(9.8 * GB)},  # 10 ms at 98% of the bandwidth
        bandwidth_gbs=BANDWIDTH,
    )
    (room,) = result.headroom
    assert room.required == pytest.approx(1.03)
    assert room.headroom == pytest.approx(10.0 / 9.8) and room.short
    assert [t.id for t in result.targets] == ["forward"]  # alone, it is still searched


@pytest.mark.parametrize("name", ["level3_002_transformer_block", "level1_009_softmax_rows"])
def test_triage_ranks_by_the_floor_the_prompt_states(name: str) -> None:
    """Kernel, group and forward targets: triage's floor is the prompt facts' bytes_floor."""
    compiled, segment, triage = recorded_results(name)
    floors = floor_bytes_by_target(compiled, segment)
    assert set(floors) == {t.id for t in segment.targets}
    for target in segment.targets:
        facts = build_facts(compiled, segment, target, triage)
        assert floors[target.id] == facts.bytes_floor
