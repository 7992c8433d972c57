"""The audit as one self-contained HTML page: tables plus plots as inline PNGs.

No external files, scripts or fonts: the page can be mailed, archived next
to the export, or opened years later.  Plots are drawn with matplotlib's Agg
backend (no display needed) and embedded as base64 PNG.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from datetime import datetime

from .model import AuditReport, CandidateAudit
from .render import FINAL_STYLE, fmt_x, outcome_text, screening_text, verdict_text

_COLOURS = {
    "shipped": "#1a7f37",
    "superseded": "#0969da",
    "not_kept": "#bf8700",
    "unverified": "#bf8700",
    "dropped": "#cf222e",
    "rejected": "#cf222e",
    "pending": "#8c959f",
    "duplicate": "#000000",
    "screened_out": "#8c959f",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:anywhere}
.nodata{color:#57606a;font-style:italic}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600} .fail{color:#cf222e;font-weight:600}
.pass{color:#1a7f37} .reject{color:#cf222e}
img{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
code{font-size:11px} details summary{cursor:pointer}
"""


def _escape(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Plot:
    """One drawn plot: the PNG and where its legend and axes landed (fractions, top-left 0).

    The boxes go into the page as data attributes, so a browser test can check that
    what a person sees has no legend over the curves.
    """

    png: str
    axes: list[tuple[float, float, float, float]]
    legend: tuple[float, float, float, float] | None


def _box(extent, width: float, height: float) -> tuple[float, float, float, float]:
    """A display-space bbox (pixels, bottom-left origin) as image fractions, top-left origin."""
    return (
        round(float(extent.x0) / width, 4),
        round(1 - float(extent.y1) / height, 4),
        round(float(extent.x1) / width, 4),
        round(1 - float(extent.y0) / height, 4),
    )


def _plot(fig, legend=None) -> Plot:
    """Render ``fig`` (constrained layout, so an outside legend gets its own room)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)  # no tight bbox: the boxes below stay exact
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    axes = [_box(ax.get_window_extent(renderer), width, height) for ax in fig.axes]
    box = _box(legend.get_window_extent(renderer), width, height) if legend else None
    return Plot(base64.b64encode(buf.getvalue()).decode("ascii"), axes, box)


def plots(report: AuditReport) -> dict[str, Plot]:
    """name -> plot, for the plots that have data: speedup over time, rejections, budget use.

    A campaign that has not started yet has none; the page says "no data yet" rather
    than drawing empty axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out: dict[str, Plot] = {}
    start = _time(report.started_at)

    # 1. per-candidate speedup over time
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for c in report.candidates:
        at = _time(c.at)
        if at is None or start is None:
            continue
        xs, ys = groups.setdefault(c.final, ([], []))
        xs.append((at - start).total_seconds())
        ys.append(c.speedup if c.speedup is not None else 0.0)
    trials = [(t, at) for t in report.model_trials if t.speedup is not None and (at := _time(t.at))]
    if (groups or trials) and start is not None:
        fig = Figure(figsize=(9, 3.6), layout="constrained")
        ax = fig.add_subplot()
        for final, (xs, ys) in sorted(groups.items()):
            marker = "x" if final in ("rejected", "dropped") else "o"
            colour = _COLOURS.get(final, "#57606a")
            ax.scatter(xs, ys, s=14, marker=marker, color=colour, label=final)
        if trials:
            ax.scatter(
                [(at - start).total_seconds() for _, at in trials],
                [t.speedup for t, _ in trials],
                s=60,
                marker="*",
                color="#8250df",
                label="whole model (gates 3-4)",
            )
        ax.axhline(1.0, color="#57606a", linewidth=0.8, linestyle="--")
        ax.set_xlabel("seconds since the campaign started")
        ax.set_ylabel("speedup vs Inductor (0 = no timing)")
        ax.set_title("speedup per candidate over time")
        legend = fig.legend(loc="outside right upper", fontsize=8)
        out["speedup"] = _plot(fig, legend)

    # 2. rejections by gate
    counts = report.rejections_by_gate()
    if counts:
        fig = Figure(figsize=(6, 3), layout="constrained")
        ax = fig.add_subplot()
        names = sorted(counts, key=lambda k: -counts[k])
        ax.bar(names, [counts[n] for n in names], color="#cf222e")
        ax.set_ylabel("candidates")
        ax.set_title("rejections by gate")
        out["rejections"] = _plot(fig)

    # 3. budget use: fraction of each limit, and cumulative use per finished search
    u, b = report.used, report.budgets
    points = [(p, at) for p in report.budget_timeline if (at := _time(p.at))]
    anything_used = u.tokens or u.usd or u.gpu_seconds or u.wall_seconds
    if anything_used or points:
        with_timeline = bool(points and start is not None)
        fig = Figure(figsize=(10 if with_timeline else 6, 3.2), layout="constrained")
        left = fig.add_subplot(1, 2 if with_timeline else 1, 1)
        rows = [
            ("tokens", u.tokens, b.max_tokens),
            ("usd", u.usd, b.max_usd),
            ("GPU-s", u.gpu_seconds, b.max_gpu_seconds),
            ("wall-s", u.wall_seconds, b.max_wall_seconds),
        ]
        labels, fracs, colours = [], [], []
        for name, used, limit in rows:
            if limit:
                labels.append(f"{name}\n{used:.4g}/{limit:.4g}")
                fracs.append(used / limit)
                colours.append("#cf222e" if used >= limit else "#0969da")
            else:
                labels.append(f"{name}\n{used:.4g} (no limit)")
                fracs.append(0.0)
                colours.append("#8c959f")
        left.barh(labels, fracs, color=colours)
        left.axvline(1.0, color="#cf222e", linewidth=0.8, linestyle="--")
        left.set_xlabel("fraction of the budget used")
        left.set_title("budget use")
        legend = None
        if with_timeline:
            right = fig.add_subplot(1, 2, 2)
            xs = [(at - start).total_seconds() for _, at in points]
            right.step(xs, [p.gpu_seconds for p, _ in points], where="post", label="GPU-s")
            right.set_xlabel("seconds since the campaign started")
            right.set_ylabel("GPU-s (cumulative)")
            twin = right.twinx()
            twin.step(
                xs, [p.tokens for p, _ in points], where="post", color="#bf8700", label="tokens"
            )
            twin.set_ylabel("tokens (cumulative)")
            right.set_title("use after each finished search")
            legend = fig.legend(loc="outside right upper", fontsize=8)
        out["budget"] = _plot(fig, legend)
    return out


PLOT_TITLES = {
    "speedup": "speedup per candidate over time",
    "rejections": "rejections by gate",
    "budget": "budget use",
}


def _plot_html(name: str, plot: Plot | None) -> str:
    if plot is None:
        return f"<p class='nodata'>{_escape(PLOT_TITLES[name])}: no data yet</p>"
    axes = ";".join(",".join(str(v) for v in box) for box in plot.axes)
    legend = ",".join(str(v) for v in plot.legend) if plot.legend else ""
    return (
        f"<img alt='{_escape(PLOT_TITLES[name])}' data-plot='{name}' data-axes='{axes}' "
        f"data-legend='{legend}' src='data:image/png;base64,{plot.png}'>"
    )


def _candidate_row(c: CandidateAudit) -> str:
    gates = "<br>".join(
        f'<span class="{"pass" if v.passed else "reject"}">{_escape(verdict_text(v))}</span>'
        for v in c.verdicts
    ) or _escape(c.deciding_gate or "-")
    if c.screening is not None:  # the first tier, above the cascade's verdicts
        gates = f"<small>{_escape(screening_text(c.screening))}</small><br>{gates}"
    refs = []
    if c.source:
        refs.append(f"source <code>{_escape(c.source.short)}</code>")
    if c.conversation:
        refs.append(f"conversation <code>{_escape(c.conversation.short)}</code>")
    for p in c.prompts:
        parts = [f"{_escape(p.role)}"]
        if p.prompt:
            parts.append(f"prompt <code>{_escape(p.prompt.short)}</code>")
        if p.reply:
            parts.append(f"reply <code>{_escape(p.reply.short)}</code>")
        refs.append(" ".join(parts))
    retime = "-"
    if c.retime is not None:
        retime = _escape(
            f"{fmt_x(c.retime.speedup) if c.retime.ok else 'dropped'}: {c.retime.reason}"
        )
    colour = _COLOURS.get(c.final, "#1f2328")
    return (
        "<tr>"
        f"<td><code>{_escape(c.id)}</code>{' <em>(provisional)</em>' if c.provisional else ''}</td>"
        f"<td><code>{_escape(c.parent_id or '-')}</code></td>"
        f"<td>{_escape(c.label or c.plan_direction or '-')}<br><small>{_escape(c.plan_description)}</small></td>"
        f"<td>{_escape(c.proposer or '-')}</td><td class='num'>{c.iteration}</td>"
        f"<td class='num'>{c.attempt}</td><td>{gates}</td>"
        f"<td class='num'>{_escape(fmt_x(c.speedup))}</td><td>{retime}</td>"
        f"<td>{'<br>'.join(refs) or '-'}</td>"
        f"<td style='color:{colour}'><b>{_escape(c.final)}</b>: {_escape(c.final_reason)}</td>"
        "</tr>"
    )


def render_html(report: AuditReport) -> str:
    images = plots(report)
    o = report.outcome
    u, b = report.used, report.budgets
    head = [
        ("campaign", f"{report.campaign_id} ({report.problem})"),
        ("source", report.source),
        ("status", f"{report.status}, phase {report.phase}" if report.phase else report.status),
        *(("waiting", line) for line in report.waiting),
        ("started / closed", f"{report.started_at} / {report.closed_at or '-'}"),
    ]
    if o is not None:
        head += [
            (
                "outcome",
                outcome_text(report)
                if report.status == "cancelled"
                else f"{o.category.value}: {fmt_x(o.speedup)} vs torch.compile ({o.compile_mode})",
            ),
            ("reason", o.reason),
            ("replaced", o.replaced_text() or "nothing (baseline returned)"),
            ("proposer", o.proposer),
        ]
    head.append(
        (
            "budget used / limit",
            f"{u.tokens} / {b.max_tokens or '-'} tokens; ${u.usd:.4f} / {b.max_usd or '-'}; "
            f"{u.gpu_seconds:.1f} / {b.max_gpu_seconds or '-'} GPU-s; "
            f"{u.wall_seconds:.1f} / {b.max_wall_seconds or '-'} wall-s",
        )
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>kernelopt audit {_escape(report.campaign_id)}</title><style>{CSS}</style></head><body>",
        f"<h1>kernelopt audit: <code>{_escape(report.campaign_id)}</code></h1>",
        "<table>"
        + "".join(f"<tr><th>{_escape(k)}</th><td>{_escape(v)}</td></tr>" for k, v in head)
        + "</table>",
        "<h2>Plots</h2>",
        *(_plot_html(name, images.get(name)) for name in PLOT_TITLES),
        "<h2>Consistency checks</h2><table><tr><th>check</th><th>ok</th><th>detail</th></tr>",
        *(
            f"<tr><td>{_escape(c.name)}</td><td class='{'ok' if c.ok else 'fail'}'>"
            f"{'ok' if c.ok else 'FAIL'}</td><td>{_escape(c.detail)}</td></tr>"
            for c in report.checks
        ),
        "</table>",
        "<h2>Searches</h2><table><tr><th>target</th><th>runs</th><th>status</th><th>tried</th>"
        "<th>best</th><th>speedup</th><th>tokens</th><th>GPU-s</th><th>stopped</th></tr>",
        *(
            f"<tr><td>{_escape(t.target_id)}</td><td class='num'>{t.runs}</td><td>{_escape(t.status)}</td>"
            f"<td class='num'>{t.candidates_tried}</td><td><code>{_escape(t.best or '-')}</code></td>"
            f"<td class='num'>{_escape(fmt_x(t.best_kernel_speedup))}</td><td class='num'>{t.tokens}</td>"
            f"<td class='num'>{t.gpu_seconds:.1f}</td><td>{_escape(t.stopped_reason)}</td></tr>"
            for t in report.targets
        ),
        "</table>",
        f"<h2>Candidates ({len(report.candidates)})</h2><table><tr><th>candidate</th>"
        "<th>parent</th><th>plan / label</th><th>proposer</th><th>iter</th><th>attempt</th>"
        "<th>gates 1-2: verdict [numbers | thresholds]</th><th>kernel speedup</th><th>re-time</th>"
        "<th>artifacts</th><th>final decision</th></tr>",
        *(_candidate_row(c) for c in report.candidates),
        "</table>",
        "<h2>Model-level gates (re-stitched models)</h2><table><tr><th>#</th><th>targets</th>"
        "<th>verdicts [numbers | thresholds]</th><th>speedup</th><th>kept</th><th>wrapper</th></tr>",
        *(
            f"<tr><td>{m.index}</td><td>{_escape(', '.join(m.targets))}</td><td>"
            + "<br>".join(_escape(verdict_text(v)) for v in m.verdicts)
            + f"</td><td class='num'>{_escape(fmt_x(m.speedup))}</td><td>{'yes' if m.kept else 'no'}</td>"
            f"<td><code>{_escape(m.wrapper.short if m.wrapper else '-')}</code></td></tr>"
            for m in report.model_trials
        ),
        "</table>",
        "<h2>Control events</h2><table><tr><th>at</th><th>kind</th><th>name</th><th>args</th>"
        "<th>result</th><th>identity</th></tr>",
        *(
            f"<tr><td>{_escape(e.at)}</td><td>{_escape(e.kind)}</td><td>{_escape(e.name)}</td><td>{_escape(e.args)}</td>"
            f"<td>{_escape(e.result)}</td><td>{_escape(e.identity)}</td></tr>"
            for e in report.controls
        ),
        "</table>",
        "<h2>Infrastructure incidents (retried or failed activities)</h2><table><tr><th>at</th>"
        "<th>workflow</th><th>activity</th><th>attempts</th><th>outcome</th><th>last failure</th></tr>",
        *(
            f"<tr><td>{_escape(i.at)}</td><td>{_escape(i.workflow_id)}</td><td>{_escape(i.activity)}</td>"
            f"<td class='num'>{i.attempts}</td><td>{_escape(i.outcome)}</td><td>{_escape(i.last_failure)}</td></tr>"
            for i in report.incidents
        ),
        "</table>",
        "<h2>Machine moves (kernelopt state export / import)</h2><table><tr><th>source stopped"
        "</th><th>how</th><th>from</th><th>resumed</th><th>on</th><th>archive</th></tr>",
        *(
            f"<tr><td>{_escape(m.last_write_at)}</td><td>{_escape(m.source_server)}</td>"
            f"<td>{_escape(m.exported_from)}</td><td>{_escape(m.imported_at)}</td>"
            f"<td>{_escape(m.imported_to)}</td><td><code>{_escape(m.archive_sha256[:12])}</code></td></tr>"
            for m in report.moves
        ),
        "</table>",
        "<h2>Runs</h2><table><tr><th>workflow</th><th>run</th><th>type</th><th>status</th>"
        "<th>events</th></tr>",
        *(
            f"<tr><td>{_escape(r.workflow_id)}</td><td><code>{_escape(r.run_id)}</code></td>"
            f"<td>{_escape(r.workflow_type)}</td><td>{_escape(r.status)}</td><td class='num'>{r.events}</td></tr>"
            for r in report.runs
        ),
        "</table></body></html>",
    ]
    return "\n".join(parts)


__all__ = ["FINAL_STYLE", "PLOT_TITLES", "Plot", "plots", "render_html"]
