"""The README's headline for a suite run, written from the run's own summary.

Numbers copied into prose by hand drift from the report they came from; this
renders them from ``report.summary.json`` and ``runs.jsonl`` so the README
states exactly what the committed report does, with what the paper's tables
need beside them: when, on which GPU and software, with which search.

    python -m kernelopt.bench.headline docs/results/h200 [--partial]

prints it; paste the output into the README's results section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .aggregate import BenchSummary
from .report import level_table, md_table
from .results import SUMMARY_SUFFIX, load_runs


class IncompleteSuite(ValueError):
    """The results cover fewer problems than the suite has: not a headline yet."""


def load_summary(results_dir: str | Path, stem: str = "report") -> BenchSummary:
    path = Path(results_dir) / f"{stem}{SUMMARY_SUFFIX}"
    return BenchSummary.model_validate_json(path.read_text(encoding="utf-8"))


def headline_markdown(results_dir: str | Path, *, partial: bool = False) -> str:
    """Markdown for the README: one line of conditions, then the per-level table."""
    summary = load_summary(results_dir)
    done, total = summary.overall.problems, summary.suite_problems
    if total is not None and done < total and not partial:
        raise IncompleteSuite(f"{done} of {total} problems have results")
    runs = load_runs(results_dir)
    days = sorted({r.started_at[:10] for r in runs})
    when = (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}") if days else "unknown"
    conditions = [
        f"{done} of {total if total is not None else done} problems",
        f"run {when}",
        f"GPU {', '.join(summary.gpu_names) or 'unknown'}",
        f"torch {', '.join(summary.torch_versions) or 'unknown'}",
        f"triton {', '.join(summary.triton_versions) or 'unknown'}",
        f"baseline torch.compile `{summary.baseline_mode}`",
        f"numerics {'; '.join(summary.numerics) or 'unknown'}",
        f"search: {' | '.join(summary.search_settings) or 'unknown'}",
    ]
    lines = ["Conditions: " + "; ".join(conditions) + ".", "", *md_table(level_table(summary))]
    return "\n".join(lines) + "\n"


def _main(argv: list[str] | None = None) -> int:
    """Print the headline; refuse an incomplete suite unless ``--partial``."""
    parser = argparse.ArgumentParser(description="Print the README's headline for a suite.")
    parser.add_argument("results", type=Path)
    parser.add_argument("--partial", action="store_true", help="allow an incomplete suite")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(headline_markdown(args.results, partial=args.partial))
    except IncompleteSuite as exc:
        sys.stderr.write(f"headline: {exc} (--partial to print it anyway)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
