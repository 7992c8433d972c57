"""Benchmark suites: discover problems, run one campaign each, aggregate, report.

``kernelopt bench`` is the paper-comparable table: per level, outcome counts
and geometric-mean speedups over torch.compile across ALL problems (unsolved at
1.0x), with the library fraction and Amdahl ceiling beside every result.
"""

from .aggregate import (
    BUCKETS,
    FAST_P,
    BenchSummary,
    LevelSummary,
    ProblemRow,
    amdahl_ceiling,
    bucket_counts,
    effective_speedup,
    fast_p,
    geomean,
    required_speedup,
    summarize,
)
from .report import ReportFiles, render_html, render_markdown, write_report
from .results import ProblemResult, load_results, result_path, save_outcome
from .runner import StartCampaign, SuiteRun, run_suite
from .suite import SuiteEntry, discover_suite

__all__ = [
    "BUCKETS",
    "FAST_P",
    "BenchSummary",
    "LevelSummary",
    "ProblemResult",
    "ProblemRow",
    "ReportFiles",
    "StartCampaign",
    "SuiteEntry",
    "SuiteRun",
    "amdahl_ceiling",
    "bucket_counts",
    "discover_suite",
    "effective_speedup",
    "fast_p",
    "geomean",
    "load_results",
    "render_html",
    "render_markdown",
    "required_speedup",
    "result_path",
    "run_suite",
    "save_outcome",
    "summarize",
    "write_report",
]
