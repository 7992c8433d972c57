"""Report generation: files exist, HTML is self-contained, tables and header are there."""

from __future__ import annotations

import re
from pathlib import Path

from kernelopt.bench.aggregate import summarize
from kernelopt.bench.report import header_lines, render_html, render_markdown, write_report
from kernelopt.bench.results import ProblemResult
from tests.support.bench_outcomes import outcome

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _summary():
    results = [
        ProblemResult(
            level=1, name="023_diag_matmul", outcome=outcome("d", "optimized", 40.0, f=0.0)
        ),
        ProblemResult(level=1, name="001_relu_chain", outcome=outcome("r", "matched", 1.0, f=0.0)),
        ProblemResult(
            level=2,
            name="001_gemm_bias_relu",
            outcome=outcome("g", "fallback", 1.0, f=0.99, reason="library dominated <b>x</b> | y"),
        ),
        ProblemResult(
            level=3, name="002_transformer_block", outcome=outcome("t", "synthesis_failure")
        ),
    ]
    return summarize(results)


def test_write_report_files(tmp_path: Path) -> None:
    files = write_report(_summary(), tmp_path / "out")
    for path in (files.markdown, files.html, files.summary, *files.figures):
        assert path.is_file() and path.stat().st_size > 0, path
    assert len(files.figures) == 3
    for fig in files.figures:
        assert fig.read_bytes().startswith(PNG_MAGIC)
    md = files.markdown.read_text()
    for fig in files.figures:
        assert f"]({fig.name})" in md  # the Markdown links its PNGs by relative path


def test_html_is_self_contained(tmp_path: Path) -> None:
    page = write_report(_summary(), tmp_path).html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "<link" not in page
    assert not re.search(r"(src|href)\s*=\s*['\"](https?:|//|file:)", page)
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 3
    srcs = re.findall(r"src=['\"]([^'\"]*)", page)
    assert all(s.startswith("data:image/png;base64,") for s in srcs)


def test_html_contains_tables_header_and_escapes() -> None:
    page = render_html(_summary(), figures={})
    assert page.count("<table>") == 3
    for text in ("geomean (all)", "fast_1.03", "level1", "level2", "level3", "023_diag_matmul"):
        assert text in page
    assert "max-autotune-no-cudagraphs" in page
    assert "NVIDIA H200" in page and "2.11.0" in page and "3.6.0" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page


def test_markdown_tables_and_numbers() -> None:
    md = render_markdown(_summary())
    assert "baseline**: torch.compile, mode `max-autotune-no-cudagraphs`" in md
    assert "**GPU**: NVIDIA H200" in md and "**torch**: 2.11.0" in md and "**triton**: 3.6.0" in md
    lines = md.splitlines()
    level_rows = [line for line in lines if line.startswith("| level1 |")]
    # level table row: 2 problems, 1 optimized, 1 matched, geomean sqrt(40) = 6.325x
    assert level_rows and level_rows[0].startswith(
        "| level1 | 2 | 1 | 1 | 0 | 0 | 6.325x | 40.000x |"
    )
    all_row = next(line for line in lines if line.startswith("| all |"))
    assert "| 4 | 1 | 1 | 1 | 1 |" in all_row
    # per-problem rows: f, impossible required speedup, escaped pipe in the reason
    gemm = next(line for line in lines if "001_gemm_bias_relu" in line)
    assert "| 0.990 |" in gemm and "impossible" in gemm and "\\|" in gemm
    # each markdown table row has the header's column count
    header = next(line for line in lines if line.startswith("| level | problems |"))
    assert all_row.count(" | ") == header.count(" | ")


def test_empty_summary_renders(tmp_path: Path) -> None:
    files = write_report(summarize([]), tmp_path)
    assert "kernelopt benchmark report" in files.html.read_text()
    assert "**baseline**: torch.compile, mode `unknown`" in files.markdown.read_text()


def test_header_names_the_numerics_policy_and_older_outcomes_without_it() -> None:
    """Outcomes say which numerics their baseline was compiled and profiled under."""
    from kernelopt.bench.aggregate import NUMERICS_NOT_RECORDED
    from kernelopt.precision import POLICY

    recorded = outcome("a", "matched").model_copy(update={"numerics": POLICY})
    results = [
        ProblemResult(level=1, name="001_a", outcome=recorded),
        ProblemResult(level=1, name="002_b", outcome=outcome("b", "fallback")),
    ]
    header = dict(header_lines(summarize(results)))
    assert f"1 of 2 problems: {POLICY}" in header["numerics"]
    assert f"1 of 2 problems: {NUMERICS_NOT_RECORDED}" in header["numerics"]
    only_new = dict(header_lines(summarize(results[:1])))
    assert only_new["numerics"] == POLICY


def test_long_reasons_are_cut_between_words_and_marked() -> None:
    from kernelopt.bench.report import clip

    reason = "no re-stitched model was kept (k0:i0-s0-v0: passed at 1.003x, not faster than the baseline)"
    assert clip(reason, 200) == reason
    assert clip("a\nb  c", 20) == "a b c"
    cut = clip(reason, 60)
    assert len(cut) <= 60 and cut.endswith(" ...")
    assert reason.startswith(cut.removesuffix(" ..."))
    assert cut.removesuffix(" ...").split()[-1] in reason.split()  # whole words only
