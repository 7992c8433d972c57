"""The audit in a terminal: a header, then tables (rich).

A long campaign gates thousands of candidates over hundreds of targets; the
terminal shows the rows that matter (what shipped, the fastest, the newest)
and counts the rest by what became of them.  ``render_html`` keeps every row.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kernelopt.contracts import GateVerdict
from kernelopt.contracts.screening import ScreeningEstimate
from kernelopt.report import tally

from .model import AuditReport, CandidateAudit, TargetAudit

# rows per table in a terminal before the rest is counted, not listed (None: every row)
CANDIDATES_SHOWN = 60
TARGETS_SHOWN = 20
# which candidates a summary keeps first
FINAL_ORDER = ("shipped", "duplicate", "superseded", "not_kept", "unverified", "pending")

FINAL_STYLE = {
    "shipped": "bold green",
    "rejected": "red",
    "dropped": "red",
    "not_kept": "yellow",
    "superseded": "cyan",
    "unverified": "yellow",
    "pending": "dim",
    "duplicate": "bold red",
    "screened_out": "dim",
}


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def fmt_num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def verdict_text(v: GateVerdict) -> str:
    """'correctness fail: max abs 3.1e-2 [max_abs_error=0.031 | rtol=0.001 atol=0.001]'."""
    metrics = " ".join(f"{k}={fmt_num(x)}" for k, x in v.metrics.items())
    limits = " ".join(f"{k}={fmt_num(x)}" for k, x in v.thresholds.items())
    numbers = " | ".join(p for p in (metrics, limits) if p)
    return f"{v.gate.value} {v.status.value}: {v.reason}" + (f" [{numbers}]" if numbers else "")


def screening_text(e: ScreeningEstimate) -> str:
    """'screening (untrusted): ~1.40x, gated: ...': the first tier, never a result."""
    estimate = f"~{fmt_x(e.estimated_speedup)}" if e.estimated_speedup else "no estimate"
    fate = "gated" if e.selected else "screened out"
    return f"screening (untrusted): {estimate}, {fate}: {e.why}"


def gates_cell(c: CandidateAudit) -> Text:
    text = Text()
    if c.screening is not None:  # the untrusted first tier, dimmed: ranking data only
        estimate = c.screening.estimated_speedup
        text.append(f"screen:{'~' + fmt_x(estimate) if estimate else 'none'} ", style="dim")
    for i, v in enumerate(c.verdicts):
        if i:
            text.append(" ")
        text.append(f"{v.gate.value}:{v.status.value}", style="green" if v.passed else "red")
    if not c.verdicts and c.deciding_gate:
        text.append(c.deciding_gate, style="red")
    return text


def outcome_text(report: AuditReport) -> str:
    """A cancelled campaign reads as cancelled, not as a 1.000x fallback."""
    o = report.outcome
    if o is None:
        return "-"
    if report.status == "cancelled":
        return f"cancelled -- {o.reason}"
    return f"{o.category.value}: {fmt_x(o.speedup)} vs torch.compile -- {o.reason}"


def header(report: AuditReport) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    o = report.outcome
    t.add_row("campaign", f"{report.campaign_id}  ({report.problem})")
    t.add_row("source", report.source)
    t.add_row("status", report.status + (f", phase {report.phase}" if report.phase else ""))
    for line in report.waiting:
        t.add_row("waiting", Text(line, style="yellow"))
    if o is not None:
        t.add_row("outcome", outcome_text(report))
        kept = "nothing (baseline returned)" if o.wrapper else "nothing (no baseline was built)"
        t.add_row("replaced", o.replaced_text() or kept)
        t.add_row("proposer", o.proposer or "-")
    u, b = report.used, report.budgets
    t.add_row(
        "budget used",
        f"{u.tokens} tokens (max {b.max_tokens or '-'}), ${u.usd:.4f} (max {b.max_usd or '-'}), "
        f"{u.gpu_seconds:.1f} GPU-s (max {b.max_gpu_seconds or '-'}), "
        f"{u.wall_seconds:.1f} wall-s (max {b.max_wall_seconds or '-'})"
        + ("" if o is not None else "; so far: tokens and GPU-s of the finished searches"),
    )
    if report.targets:
        t.add_row("targets", targets_line(report.targets))
    runs = {r.workflow_type: 0 for r in report.runs}
    for r in report.runs:
        runs[r.workflow_type] += 1
    t.add_row("runs", ", ".join(f"{n} {k}" for k, n in runs.items()))
    return t


def shown_candidates(
    candidates: list[CandidateAudit], limit: int | None = CANDIDATES_SHOWN
) -> tuple[list[CandidateAudit], list[CandidateAudit]]:
    """(rows to show, rows to count): what shipped or stands out, then the fastest, then the newest."""
    if limit is None or len(candidates) <= limit:
        return candidates, []
    rank = {final: i for i, final in enumerate(FINAL_ORDER)}
    newest = sorted(candidates, key=lambda c: c.at, reverse=True)
    ranked = sorted(
        newest,
        key=lambda c: (
            rank.get(c.final, len(rank)),
            not c.passed_gates_1_2,
            -(c.speedup or 0.0),
        ),
    )
    shown = {id(c) for c in ranked[:limit]}
    return (
        [c for c in candidates if id(c) in shown],  # in the campaign's own order
        [c for c in candidates if id(c) not in shown],
    )


def remainder_text(hidden: list[CandidateAudit]) -> str:
    """'2,940 more: 2,100 rejected (correctness 1,500, compile 600), 840 not_kept'."""
    finals = Counter(c.final or "-" for c in hidden)
    gates = Counter(c.deciding_gate or "-" for c in hidden if c.final in ("rejected", "dropped"))
    return f"{len(hidden):,} more: " + tally(finals, gates)


def candidates_table(report: AuditReport, limit: int | None = CANDIDATES_SHOWN) -> Table:
    t = Table(title="candidates", show_lines=False)
    for col in (
        "candidate",
        "parent",
        "plan / label",
        "by",
        "att",
        "gates",
        "kernel",
        "retime",
        "decision",
    ):
        t.add_column(col, overflow="fold")
    shown, hidden = shown_candidates(report.candidates, limit)
    if hidden:
        t.caption = remainder_text(hidden) + " (every row: the HTML audit)"
    for c in shown:
        plan = c.label or c.plan_direction or "-"
        retime = "-"
        if c.retime is not None:
            retime = fmt_x(c.retime.speedup) if c.retime.ok else "dropped"
        t.add_row(
            c.id,
            c.parent_id or "-",
            plan,
            c.proposer or "-",
            str(c.attempt),
            gates_cell(c),
            fmt_x(c.speedup),
            retime,
            Text(f"{c.final}: {c.final_reason}", style=FINAL_STYLE.get(c.final, "")),
        )
    return t


WIDE = 140  # below this many columns the candidates are listed, not tabulated


def candidates_list(report: AuditReport, limit: int | None = CANDIDATES_SHOWN) -> Group:
    """The candidates for a narrow terminal: one short block each, ids never cut.

    Nine columns do not fit 80 characters without breaking words and ids; a block
    per candidate keeps every value whole and wraps only the reasons, at spaces.
    """
    parts: list = [Text(f"candidates ({len(report.candidates)})", style="bold")]
    if not report.candidates:
        parts.append(Text("  none yet" if report.status == "running" else "  none", style="dim"))
    shown, hidden = shown_candidates(report.candidates, limit)
    for c in shown:
        head = Text(c.id, style="bold", no_wrap=True, overflow="ignore")
        head.append("  ")
        head.append(c.final or "-", style=FINAL_STYLE.get(c.final, ""))
        head.append(f"  kernel {fmt_x(c.speedup)}")
        if c.retime is not None:
            head.append(f"  retime {fmt_x(c.retime.speedup) if c.retime.ok else 'dropped'}")
        parts.append(head)
        gates = Text("gates ")
        gates.append_text(gates_cell(c))
        lineage = f"parent {c.parent_id or 'root'}, attempt {c.attempt}"
        plan = c.label or c.plan_direction
        if plan:
            lineage += f", plan {plan}"
        if c.proposer:
            lineage += f", by {c.proposer}"
        lines = [gates, Text(lineage, style="dim")]
        if c.final_reason:
            lines.append(Text(c.final_reason))
        parts += [Padding(line, (0, 0, 0, 2)) for line in lines]  # wrapped lines stay indented
    if hidden:
        parts.append(Text(remainder_text(hidden) + " (every row: the HTML audit)", style="dim"))
    return Group(*parts)


def targets_line(targets: list[TargetAudit]) -> str:
    """'340 searched: 300 completed, 1 running' -- how far the searches got."""
    statuses = Counter(t.status or "-" for t in targets)
    return f"{len(targets):,} searched: " + ", ".join(
        f"{n:,} {s}" for s, n in statuses.most_common()
    )


def targets_table(report: AuditReport, limit: int | None = TARGETS_SHOWN) -> Table:
    """Per-target searches, best kernel speedup first; the rest counted in the caption."""
    t = Table(title="targets")
    for col in ("target", "status", "candidates", "best", "GPU-s", "stopped"):
        t.add_column(col, overflow="fold")
    ranked = sorted(
        report.targets, key=lambda x: (-(x.best_kernel_speedup or 0.0), -x.candidates_tried)
    )
    shown = ranked if limit is None else ranked[:limit]
    for x in shown:
        t.add_row(
            x.target_id,
            x.status or "-",
            f"{x.candidates_tried:,}",
            fmt_x(x.best_kernel_speedup),
            f"{x.gpu_seconds:.0f}",
            x.stopped_reason or "-",
        )
    rest = ranked[len(shown) :]
    if rest:
        t.caption = (
            f"{len(rest):,} more targets, {sum(x.candidates_tried for x in rest):,} candidates, "
            f"best {fmt_x(max((x.best_kernel_speedup or 0.0) for x in rest) or None)}"
        )
    return t


def trials_table(report: AuditReport) -> Table:
    t = Table(title="model-level gates (re-stitched models)")
    for col in ("#", "targets", "verdicts", "speedup", "kept"):
        t.add_column(col, overflow="fold")
    for m in report.model_trials:
        t.add_row(
            str(m.index),
            ", ".join(m.targets),
            "\n".join(verdict_text(v) for v in m.verdicts),
            fmt_x(m.speedup),
            "yes" if m.kept else "no",
        )
    return t


def events_table(report: AuditReport) -> Table:
    t = Table(title="control events and incidents")
    t.add_column("at", no_wrap=True)
    for col in ("what", "detail"):
        t.add_column(col, overflow="fold")
    rows = [
        (
            _short_time(e.at),
            f"{e.kind} {e.name}",
            f"{e.args} -> {e.result}" if e.kind == "update" else str(e.args),
        )
        for e in report.controls
    ]
    rows += [
        (
            _short_time(i.at),
            f"{i.activity} {i.outcome}",
            f"{i.attempts} attempt(s) in {i.workflow_id}: {i.last_failure}",
        )
        for i in report.incidents
    ]
    for m in report.moves:
        rows.append(
            (
                _short_time(m.last_write_at),
                "machine lost"
                if m.source_server == "lost"
                else f"state exported ({m.source_server})",
                f"last write of the server's state on {m.exported_from}",
            )
        )
        rows.append(
            (
                _short_time(m.imported_at),
                "state resumed",
                f"imported on {m.imported_to} (archive {m.archive_sha256[:12]}, {m.kind})",
            )
        )
    for row in sorted(rows):
        t.add_row(*row)
    return t


def checks_table(report: AuditReport) -> Table:
    t = Table(title="consistency checks")
    t.add_column("check")
    t.add_column("ok")
    t.add_column("detail", overflow="fold")
    for c in report.checks:
        t.add_row(
            c.name, Text("ok" if c.ok else "FAIL", style="green" if c.ok else "bold red"), c.detail
        )
    return t


def _short_time(value: str) -> str:
    """'2026-11-29 08:57:31' from an ISO stamp: whole, and narrow enough for 80 columns."""
    return value[:19].replace("T", " ")


def render(report: AuditReport, width: int = 200, limit: int | None = CANDIDATES_SHOWN) -> Group:
    """The whole audit; below ``WIDE`` columns the candidates come as a list.

    ``limit`` bounds the candidate rows (None: all of them); the targets table
    appears once a campaign has more than one target.
    """
    if width >= WIDE:
        candidates = candidates_table(report, limit)
    else:
        candidates = candidates_list(report, limit)
    parts: list = [header(report)]
    if len(report.targets) > 1:
        parts.append(targets_table(report, None if limit is None else TARGETS_SHOWN))
    parts.append(candidates)
    if report.model_trials:
        parts.append(trials_table(report))
    if report.controls or report.incidents or report.moves:
        parts.append(events_table(report))
    parts.append(checks_table(report))
    return Group(*parts)


def print_report(
    report: AuditReport, console: Console, limit: int | None = CANDIDATES_SHOWN
) -> None:
    console.print(render(report, console.width, limit))


__all__ = [
    "CANDIDATES_SHOWN",
    "fmt_x",
    "outcome_text",
    "print_report",
    "remainder_text",
    "render",
    "shown_candidates",
    "targets_table",
    "verdict_text",
]
