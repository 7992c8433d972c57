"""The bench report: one Markdown file, one self-contained HTML file, the summary JSON.

Tables are built once as rows of strings and rendered to both formats, so the
Markdown and HTML can never disagree.  The HTML embeds its figures as base64
PNG and has no external reference (no scripts, stylesheets or images to
fetch), so it can be attached to an issue or opened offline; the Markdown
links PNG files written beside it.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable
from pathlib import Path

from kernelopt.contracts.base import Frozen
from kernelopt.log import get_logger
from kernelopt.report import ceiling_text

from .aggregate import BELOW_BUCKETS, BUCKETS, CATEGORIES, FAST_P, BenchSummary
from .gpu_cost import COST_NOTE, cost_table, problem_cost_table
from .plots import FIGURES
from .results import SUMMARY_SUFFIX
from .tables import Table, html_table, md_table

log = get_logger(__name__)


class ReportFiles(Frozen):
    markdown: Path
    html: Path
    summary: Path
    figures: list[Path]


def _speedup_text(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{value:.{digits}f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else f"{value:{spec}}"


def header_lines(summary: BenchSummary) -> list[tuple[str, str]]:
    """The facts every table depends on, stated once at the top."""
    facts: list[tuple[str, str]] = []
    if summary.suite_problems is not None:
        done, total = summary.overall.problems, summary.suite_problems
        partial = ""
        if done < total:
            failed = len(summary.failed)
            unrun = total - done - failed
            rest = "the rest have not run yet"
            if failed:
                rest = f"{failed} failed" + (f", {unrun} not run yet" if unrun > 0 else "")
            partial = f" (PARTIAL: {rest})"
        facts.append(("problems finished", f"{done} of {total}{partial}"))
    if summary.failed:
        facts.append(
            ("problems failed", f"{len(summary.failed)} on their last attempt (listed at the end)")
        )
    search = summary.search_settings
    if search:
        facts.append(("search", search[0] if len(search) == 1 else "MIXED: " + "; ".join(search)))
    return [
        *facts,
        ("baseline", f"torch.compile, mode `{summary.baseline_mode}`"),
        ("GPU", ", ".join(summary.gpu_names) or "unknown"),
        ("torch", ", ".join(summary.torch_versions) or "unknown"),
        ("triton", ", ".join(summary.triton_versions) or "unknown"),
        ("numerics", "; ".join(summary.numerics) or "unknown"),
        ("perf gate gamma", f"{summary.gamma:g}"),
        ("date", summary.generated_at),
    ]


def level_table(summary: BenchSummary) -> Table:
    head = [
        "level",
        "problems",
        *[c.value.replace("_", " ") for c in CATEGORIES],
        "geomean (all)",
        "geomean (optimized)",
        "pass rate",
        *[f"fast_{p}" for p in FAST_P],
        "mean f",
        "GPU-s",
        "tokens",
    ]
    rows = []
    for s in [*summary.levels, summary.overall]:
        rows.append(
            [
                s.label,
                str(s.problems),
                *[str(s.counts.get(c.value, 0)) for c in CATEGORIES],
                _speedup_text(s.geomean, 3),
                _speedup_text(s.optimized_geomean, 3),
                _pct(s.pass_rate),
                *[_pct(s.fast_p.get(str(p))) for p in FAST_P],
                _num(s.mean_library_fraction),
                f"{s.gpu_seconds:.0f}",
                f"{s.tokens:,}",
            ]
        )
    return head, rows


def bucket_table(summary: BenchSummary) -> Table:
    labels = [label for label, _, _ in BUCKETS] + [BELOW_BUCKETS]
    rows = [[s.label, *[str(s.buckets.get(b, 0)) for b in labels]] for s in summary.levels]
    rows.append([summary.overall.label, *[str(summary.overall.buckets.get(b, 0)) for b in labels]])
    return ["level", *labels], rows


def problem_table(summary: BenchSummary) -> Table:
    head = [
        "level",
        "problem",
        "outcome",
        "speedup",
        "family",
        "f",
        "ceiling S=10",
        "ceiling S=inf",
        "needed S",
        "baseline ms",
        "GPU-s",
        "tokens",
        "reason",
    ]
    rows = []
    for r in summary.problems:
        needed = (
            "impossible"
            if r.library_fraction is not None and r.required_speedup is None
            else _speedup_text(r.required_speedup, 1)
        )
        rows.append(
            [
                "-" if r.level is None else str(r.level),
                r.name,
                r.category.value,
                _speedup_text(r.speedup, 3),
                ", ".join(r.families) or "-",
                _num(r.library_fraction) + ("*" if r.single_kernel else ""),
                ceiling_text(r.ceiling_10),
                ceiling_text(r.ceiling),
                needed,
                _num(r.baseline_ms, ".4f"),
                f"{r.gpu_seconds:.0f}",
                f"{r.tokens:,}",
                clip(r.reason, REASON_CHARS),
            ]
        )
    return head, rows


REASON_CHARS = 160  # per-problem reasons in the tables; the outcome JSON has them whole


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters, cut between words and marked as cut.

    A reason cut mid-word reads as a different reason ("passed at 1.0" of "1.003x").
    """
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 4]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ;,:(") + " ..."


def failed_table(summary: BenchSummary) -> Table:
    """Problems whose campaign raised instead of ending with an outcome: not in any count."""
    rows = [[key, clip(error, 300)] for key, error in summary.failed.items()]
    return ["problem", "error of its last attempt"], rows


NOTE = (
    "Speedups are over the torch.compile baseline named above. Geometric means are taken "
    "over all problems of a level, with synthesis failures and fallbacks counted at 1.0x; "
    "fast_p is the fraction of problems verified correct and faster than p. "
    "f is the fraction of baseline time spent in vendor library calls; the Amdahl ceiling "
    "1/(f + (1-f)/S) bounds any result that leaves those calls untouched. Problems marked "
    "* ran in single-kernel mode: the whole forward, library call included, was the target, "
    "so nothing was frozen and no ceiling applies (f is shown as measured). A reason "
    f"longer than {REASON_CHARS} characters ends in '...'; the problem's outcome file "
    "(levelN/NAME.json) has it whole."
)

SECTIONS = (
    ("Per level", level_table),
    ("Speedup distribution (problems per bucket)", bucket_table),
    ("Per problem", problem_table),
)
FAILED_TITLE = "Problems that failed (in no count above; re-running the bench retries them)"


def gpu_cost_table(summary: BenchSummary) -> Table:
    """GPU-seconds per verdict and per problem (issue 22 point 5), the earlier run beside."""
    if summary.gpu_cost is None:
        return [], []
    return cost_table(summary.gpu_cost, summary.gpu_cost_before)


def gpu_cost_problem_table(summary: BenchSummary) -> Table:
    if summary.gpu_cost is None:
        return [], []
    return problem_cost_table(summary.gpu_cost, summary.gpu_cost_before)


SECTION_NOTES: dict[Callable[[BenchSummary], Table], str] = {gpu_cost_table: COST_NOTE}


def _cost_sections(summary: BenchSummary) -> list[tuple[str, Callable[[BenchSummary], Table]]]:
    if summary.gpu_cost is None:
        return []
    than = ", before and after" if summary.gpu_cost_before is not None else ""
    return [
        (f"GPU-seconds per verdict and per problem{than}", gpu_cost_table),
        (f"GPU cost per problem{than}", gpu_cost_problem_table),
    ]


def _sections(summary: BenchSummary) -> list[tuple[str, Callable[[BenchSummary], Table]]]:
    """Every speedup table's title names the baseline its speedups are over."""
    baseline = f" -- speedups over torch.compile `{summary.baseline_mode}`"
    sections = [(title + baseline, build) for title, build in SECTIONS]
    failed = [(FAILED_TITLE, failed_table)] if summary.failed else []
    return [*sections, *_cost_sections(summary), *failed]


FIGURE_TITLES = {
    "outcomes_per_level": "Outcomes per level",
    "speedup_histogram": "Speedup histogram",
    "speedup_vs_f": "Speedup vs library fraction, with Amdahl ceilings",
}


def render_markdown(summary: BenchSummary, figure_files: dict[str, str] | None = None) -> str:
    """Markdown report; ``figure_files`` maps figure name -> relative PNG path to link."""
    lines = ["# kernelopt benchmark report", ""]
    lines += [f"- **{k}**: {v}" for k, v in header_lines(summary)]
    lines += ["", NOTE, ""]
    for title, build in _sections(summary):
        note = [SECTION_NOTES[build], ""] if build in SECTION_NOTES else []
        lines += [f"## {title}", "", *note, *md_table(build(summary)), ""]
        if build is level_table and figure_files:
            for name, rel in figure_files.items():
                lines += [f"![{FIGURE_TITLES.get(name, name)}]({rel})", ""]
    return "\n".join(lines)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
    "td:nth-child(2),th:nth-child(2){text-align:left}"
    "th{background:#f1f3f5}img{max-width:100%;margin:0.5em 1em 0.5em 0}"
)


def render_html(summary: BenchSummary, figures: dict[str, bytes] | None = None) -> str:
    """Self-contained HTML: inline CSS, figures as ``data:image/png;base64`` URIs."""
    figures = figures if figures is not None else {n: fn(summary) for n, fn in FIGURES.items()}
    facts = "".join(
        f"<li><b>{html.escape(k)}</b>: {html.escape(v.replace('`', ''))}</li>"
        for k, v in header_lines(summary)
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>kernelopt benchmark report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>kernelopt benchmark report</h1>",
        f"<ul>{facts}</ul><p>{html.escape(NOTE)}</p>",
    ]
    for title, build in _sections(summary):
        parts.append(f"<h2>{html.escape(title.replace('`', ''))}</h2>")
        if build in SECTION_NOTES:
            parts.append(f"<p>{html.escape(SECTION_NOTES[build])}</p>")
        parts.append(html_table(build(summary)))
        if build is level_table:
            for name, png in figures.items():
                data = base64.b64encode(png).decode("ascii")
                alt = html.escape(FIGURE_TITLES.get(name, name))
                parts.append(f"<img alt='{alt}' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(summary: BenchSummary, out_dir: str | Path, stem: str = "report") -> ReportFiles:
    """Write ``stem.md``, ``stem.html``, ``stem.summary.json`` and the PNGs into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = {name: fn(summary) for name, fn in FIGURES.items()}
    figure_paths = []
    for name, png in figures.items():
        path = out / f"{stem}_{name}.png"
        path.write_bytes(png)
        figure_paths.append(path)
    md = out / f"{stem}.md"
    md.write_text(
        render_markdown(summary, {n: p.name for n, p in zip(figures, figure_paths, strict=True)})
    )
    page = out / f"{stem}.html"
    page.write_text(render_html(summary, figures))
    js = out / f"{stem}{SUMMARY_SUFFIX}"
    js.write_text(summary.model_dump_json(indent=2))
    log.info(
        "bench.report_written", markdown=str(md), html=str(page), problems=summary.overall.problems
    )
    return ReportFiles(markdown=md, html=page, summary=js, figures=figure_paths)
