"""The README headline is rendered from the committed summary, and only for a whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.bench.aggregate import summarize
from kernelopt.bench.headline import IncompleteSuite, headline_markdown
from kernelopt.bench.report import write_report
from kernelopt.bench.results import BenchRun, ProblemResult, record_run
from tests.support.bench_outcomes import outcome


def _results_dir(tmp_path: Path, suite_problems: int) -> Path:
    results = [
        ProblemResult(level=1, name="001_a", outcome=outcome("a", "optimized", 2.0, f=0.0)),
        ProblemResult(level=2, name="001_b", outcome=outcome("b", "fallback", 1.0, f=0.5)),
    ]
    write_report(
        summarize(results, suite_problems=suite_problems, search_settings=["proposer builtin"]),
        tmp_path,
    )
    for day in ("2026-11-28", "2026-11-30"):
        record_run(
            tmp_path,
            BenchRun(started_at=f"{day}T10:00:00+00:00", suite_problems=2, search="x"),
        )
    return tmp_path


def test_headline_states_conditions_and_the_level_table(tmp_path: Path) -> None:
    text = headline_markdown(_results_dir(tmp_path, suite_problems=2))
    assert "2 of 2 problems" in text and "run 2026-11-28 to 2026-11-30" in text
    assert "search: proposer builtin" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if "|" in line}
    assert "level1" in rows and "level2" in rows and "all" in rows
    assert "1.414x" in rows["all"]  # geomean of 2.0 and 1.0


def test_incomplete_suite_is_refused_unless_partial(tmp_path: Path) -> None:
    results = _results_dir(tmp_path, suite_problems=3)
    with pytest.raises(IncompleteSuite, match="2 of 3"):
        headline_markdown(results)
    assert "2 of 3 problems" in headline_markdown(results, partial=True)


def test_readme_carries_the_committed_suites_headline() -> None:
    """The README's table is the committed report's, not a hand-edited copy of it."""
    root = Path(__file__).resolve().parents[3]
    headline = headline_markdown(root / "docs" / "results" / "h200")
    assert headline in (root / "README.md").read_text(encoding="utf-8"), (
        "README's suite headline differs from `python -m kernelopt.bench.headline docs/results/h200`"
    )
