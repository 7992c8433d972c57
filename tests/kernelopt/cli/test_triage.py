"""``kernelopt triage``: argument errors without a GPU, and the human table."""

from __future__ import annotations

from pathlib import Path

from kernelopt.cli.triage import render, triage_command
from kernelopt.contracts.compiled import CompileResult, SegmentResult, TriageResult
from tests.support.wrappers import fixture_json


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
    name = "level2_001_gemm_bias_relu"
    compiled = CompileResult.model_validate(fixture_json(name, "compile"))
    seg = SegmentResult.model_validate(fixture_json(name, "segment"))
    tri = TriageResult.model_validate(fixture_json(name, "triage"))
    render(compiled, seg, tri)
    out = capsys.readouterr().out
    assert f"f = {tri.library_fraction:.3f}" in out
    assert "library_dominated" in out
    assert "S=inf" in out
