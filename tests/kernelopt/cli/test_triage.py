"""``kernelopt triage``: argument errors without a GPU, and the human table."""

from __future__ import annotations

from pathlib import Path

from kernelopt.cli.triage import render, triage_command
from kernelopt.compile.triage import summarize
from kernelopt.contracts.compiled import KernelTiming, SearchMode, SearchTarget, TargetKind
from tests.support.recorded_results import recorded_results


def test_bad_problem_file_exits_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Model:\n    pass\n")
    assert triage_command(bad, False, "auto") == 2
    assert "forward" in capsys.readouterr().err
    assert triage_command(tmp_path / "missing.py", True, "auto") == 2


def test_bad_mode_exits_2(tmp_path: Path) -> None:
    good = Path(__file__).resolve().parents[2] / "fixtures" / "compile" / "tiny_linear_relu.py"
    assert triage_command(good, False, "sideways") == 2


def test_render_shows_f_ceiling_and_verdict(capsys) -> None:
    compiled, seg, tri = recorded_results("level2_001_gemm_bias_relu")
    render(compiled, seg, tri)
    out = capsys.readouterr().out
    assert f"f = {tri.library_fraction:.3f}" in out
    assert "library_dominated" in out
    assert "S=inf" in out


def test_render_shows_the_search_order_and_why_a_target_is_searched_last(capsys) -> None:
    compiled, seg, _ = recorded_results("level2_001_gemm_bias_relu")
    per_kernel = [
        KernelTiming(name="extern_kernels.mm", ms=3.0, is_library=True),
        KernelTiming(name="triton_poi_fused_add_0", ms=6.0, is_library=False),
        KernelTiming(name="triton_red_fused_sum_1", ms=1.0, is_library=False),
    ]
    targets = [
        SearchTarget(id=k.name, kind=TargetKind.KERNEL, kernels=[k.name])
        for k in per_kernel
        if not k.is_library
    ]
    # at 1000 GB/s the pointwise kernel runs at 98% of the bandwidth, the reduction at 7%
    floors = {"triton_poi_fused_add_0": int(5.88e9), "triton_red_fused_sum_1": int(0.07e9)}
    tri = summarize(per_kernel, targets, SearchMode.MULTI, floor_bytes=floors, bandwidth_gbs=1e3)
    render(compiled, seg, tri)
    out = " ".join(capsys.readouterr().out.split())
    assert "Search order (2 searched)" in out
    assert "1 │ triton_red_fused_sum_1 │ 10.0%" in out
    assert "2 │ triton_poi_fused_add_0 │ 60.0% │ 1.051x │ 1.02x short" in out
    (short,) = [r for r in tri.headroom if r.short]
    assert f"triton_poi_fused_add_0: {short.reason}" in out
    assert "98% of peak" in short.reason and tri.headroom_rule in out
