"""The audit in a terminal: a header, then tables (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kernelopt.contracts import GateVerdict

from .model import AuditReport, CandidateAudit

FINAL_STYLE = {
    "shipped": "bold green",
    "rejected": "red",
    "dropped": "red",
    "not_kept": "yellow",
    "superseded": "cyan",
    "unverified": "yellow",
    "pending": "dim",
    "duplicate": "bold red",
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


def gates_cell(c: CandidateAudit) -> Text:
    text = Text()
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
        t.add_row("replaced", ", ".join(o.replaced) or kept)
        t.add_row("proposer", o.proposer or "-")
    u, b = report.used, report.budgets
    t.add_row(
        "budget used",
        f"{u.tokens} tokens (max {b.max_tokens or '-'}), ${u.usd:.4f} (max {b.max_usd or '-'}), "
        f"{u.gpu_seconds:.1f} GPU-s (max {b.max_gpu_seconds or '-'}), "
        f"{u.wall_seconds:.1f} wall-s (max {b.max_wall_seconds or '-'})",
    )
    runs = {r.workflow_type: 0 for r in report.runs}
    for r in report.runs:
        runs[r.workflow_type] += 1
    t.add_row("runs", ", ".join(f"{n} {k}" for k, n in runs.items()))
    return t


def candidates_table(report: AuditReport) -> Table:
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
    for c in report.candidates:
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


def candidates_list(report: AuditReport) -> Group:
    """The candidates for a narrow terminal: one short block each, ids never cut.

    Nine columns do not fit 80 characters without breaking words and ids; a block
    per candidate keeps every value whole and wraps only the reasons, at spaces.
    """
    parts: list = [Text(f"candidates ({len(report.candidates)})", style="bold")]
    if not report.candidates:
        parts.append(Text("  none yet" if report.status == "running" else "  none", style="dim"))
    for c in report.candidates:
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
    return Group(*parts)


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


def render(report: AuditReport, width: int = 200) -> Group:
    """The whole audit; below ``WIDE`` columns the candidates come as a list."""
    candidates = candidates_table(report) if width >= WIDE else candidates_list(report)
    parts: list = [header(report), candidates]
    if report.model_trials:
        parts.append(trials_table(report))
    if report.controls or report.incidents or report.moves:
        parts.append(events_table(report))
    parts.append(checks_table(report))
    return Group(*parts)


def print_report(report: AuditReport, console: Console) -> None:
    console.print(render(report, console.width))


__all__ = ["fmt_x", "outcome_text", "print_report", "render", "verdict_text"]
