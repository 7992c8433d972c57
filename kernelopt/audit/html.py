"""The audit as one self-contained HTML page: tables plus plots as inline PNGs.

No external files, scripts or fonts: the page can be mailed, archived next
to the export, or opened years later.  Plots are drawn with matplotlib's Agg
backend (no display needed) and embedded as base64 PNG.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime

from .model import AuditReport, CandidateAudit
from .render import FINAL_STYLE, fmt_x, verdict_text

_COLOURS = {
    "shipped": "#1a7f37",
    "superseded": "#0969da",
    "not_kept": "#bf8700",
    "unverified": "#bf8700",
    "dropped": "#cf222e",
    "rejected": "#cf222e",
    "pending": "#8c959f",
    "duplicate": "#000000",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600} .fail{color:#cf222e;font-weight:600}
.pass{color:#1a7f37} .reject{color:#cf222e}
img{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
code{font-size:11px} details summary{cursor:pointer}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plots(report: AuditReport) -> dict[str, str]:
    """name -> base64 PNG: speedup over time, rejections by gate, budget use."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out: dict[str, str] = {}
    start = _time(report.started_at)

    # 1. per-candidate speedup over time
    fig = Figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for c in report.candidates:
        at = _time(c.at)
        if at is None or start is None:
            continue
        x = (at - start).total_seconds()
        y = c.speedup if c.speedup is not None else 0.0
        xs, ys = groups.setdefault(c.final, ([], []))
        xs.append(x)
        ys.append(y)
    for final, (xs, ys) in sorted(groups.items()):
        marker = "x" if final in ("rejected", "dropped") else "o"
        ax.scatter(xs, ys, s=14, marker=marker, color=_COLOURS.get(final, "#57606a"), label=final)
    trials = [(t, _time(t.at)) for t in report.model_trials if t.speedup is not None]
    if trials and start is not None:
        ax.scatter(
            [(at - start).total_seconds() for _, at in trials if at],
            [t.speedup for t, at in trials if at],
            s=60,
            marker="*",
            color="#8250df",
            label="whole model (gates 3-4)",
        )
    ax.axhline(1.0, color="#57606a", linewidth=0.8, linestyle="--")
    ax.set_xlabel("seconds since the campaign started")
    ax.set_ylabel("speedup vs Inductor (0 = no timing)")
    ax.set_title("speedup per candidate over time")
    if groups or trials:
        ax.legend(fontsize=7, loc="upper left")
    out["speedup"] = _png(fig)

    # 2. rejections by gate
    fig = Figure(figsize=(6, 3))
    ax = fig.add_subplot()
    counts = report.rejections_by_gate()
    if counts:
        names = sorted(counts, key=lambda k: -counts[k])
        ax.bar(names, [counts[n] for n in names], color="#cf222e")
    else:
        ax.text(0.5, 0.5, "no rejections", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("candidates")
    ax.set_title("rejections by gate")
    out["rejections"] = _png(fig)

    # 3. budget use: fraction of each limit, and cumulative use per finished search
    fig = Figure(figsize=(10, 3.2))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    u, b = report.used, report.budgets
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
    points = [(p, _time(p.at)) for p in report.budget_timeline]
    if points and start is not None:
        xs = [(at - start).total_seconds() for _, at in points if at]
        right.step(xs, [p.gpu_seconds for p, at in points if at], where="post", label="GPU-s")
        right.set_xlabel("seconds since the campaign started")
        right.set_ylabel("GPU-s (cumulative)")
        twin = right.twinx()
        twin.step(
            xs, [p.tokens for p, at in points if at], where="post", color="#bf8700", label="tokens"
        )
        twin.set_ylabel("tokens (cumulative)")
    right.set_title("use after each finished search")
    out["budget"] = _png(fig)
    return out


def _candidate_row(c: CandidateAudit) -> str:
    gates = "<br>".join(
        f'<span class="{"pass" if v.passed else "reject"}">{_e(verdict_text(v))}</span>'
        for v in c.verdicts
    ) or _e(c.deciding_gate or "-")
    refs = []
    if c.source:
        refs.append(f"source <code>{_e(c.source.short)}</code>")
    if c.conversation:
        refs.append(f"conversation <code>{_e(c.conversation.short)}</code>")
    for p in c.prompts:
        parts = [f"{_e(p.role)}"]
        if p.prompt:
            parts.append(f"prompt <code>{_e(p.prompt.short)}</code>")
        if p.reply:
            parts.append(f"reply <code>{_e(p.reply.short)}</code>")
        refs.append(" ".join(parts))
    retime = "-"
    if c.retime is not None:
        retime = _e(f"{fmt_x(c.retime.speedup) if c.retime.ok else 'dropped'}: {c.retime.reason}")
    colour = _COLOURS.get(c.final, "#1f2328")
    return (
        "<tr>"
        f"<td><code>{_e(c.id)}</code>{' <em>(provisional)</em>' if c.provisional else ''}</td>"
        f"<td><code>{_e(c.parent_id or '-')}</code></td>"
        f"<td>{_e(c.label or c.plan_direction or '-')}<br><small>{_e(c.plan_description)}</small></td>"
        f"<td>{_e(c.proposer or '-')}</td><td class='num'>{c.iteration}</td>"
        f"<td class='num'>{c.attempt}</td><td>{gates}</td>"
        f"<td class='num'>{_e(fmt_x(c.speedup))}</td><td>{retime}</td>"
        f"<td>{'<br>'.join(refs) or '-'}</td>"
        f"<td style='color:{colour}'><b>{_e(c.final)}</b>: {_e(c.final_reason)}</td>"
        "</tr>"
    )


def render_html(report: AuditReport) -> str:
    images = plots(report)
    o = report.outcome
    u, b = report.used, report.budgets
    head = [
        ("campaign", f"{report.campaign_id} ({report.problem})"),
        ("source", report.source),
        ("status", f"{report.status} {report.phase}"),
        ("started / closed", f"{report.started_at} / {report.closed_at or '-'}"),
    ]
    if o is not None:
        head += [
            (
                "outcome",
                f"{o.category.value}: {fmt_x(o.speedup)} vs torch.compile ({o.compile_mode})",
            ),
            ("reason", o.reason),
            ("replaced", ", ".join(o.replaced) or "nothing (baseline returned)"),
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
        f"<title>kernelopt audit {_e(report.campaign_id)}</title><style>{CSS}</style></head><body>",
        f"<h1>kernelopt audit: <code>{_e(report.campaign_id)}</code></h1>",
        "<table>"
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in head)
        + "</table>",
        "<h2>Plots</h2>",
        *(f"<img alt='{k}' src='data:image/png;base64,{v}'>" for k, v in images.items()),
        "<h2>Consistency checks</h2><table><tr><th>check</th><th>ok</th><th>detail</th></tr>",
        *(
            f"<tr><td>{_e(c.name)}</td><td class='{'ok' if c.ok else 'fail'}'>"
            f"{'ok' if c.ok else 'FAIL'}</td><td>{_e(c.detail)}</td></tr>"
            for c in report.checks
        ),
        "</table>",
        "<h2>Searches</h2><table><tr><th>target</th><th>runs</th><th>status</th><th>tried</th>"
        "<th>best</th><th>speedup</th><th>tokens</th><th>GPU-s</th><th>stopped</th></tr>",
        *(
            f"<tr><td>{_e(t.target_id)}</td><td class='num'>{t.runs}</td><td>{_e(t.status)}</td>"
            f"<td class='num'>{t.candidates_tried}</td><td><code>{_e(t.best or '-')}</code></td>"
            f"<td class='num'>{_e(fmt_x(t.best_kernel_speedup))}</td><td class='num'>{t.tokens}</td>"
            f"<td class='num'>{t.gpu_seconds:.1f}</td><td>{_e(t.stopped_reason)}</td></tr>"
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
            f"<tr><td>{m.index}</td><td>{_e(', '.join(m.targets))}</td><td>"
            + "<br>".join(_e(verdict_text(v)) for v in m.verdicts)
            + f"</td><td class='num'>{_e(fmt_x(m.speedup))}</td><td>{'yes' if m.kept else 'no'}</td>"
            f"<td><code>{_e(m.wrapper.short if m.wrapper else '-')}</code></td></tr>"
            for m in report.model_trials
        ),
        "</table>",
        "<h2>Control events</h2><table><tr><th>at</th><th>kind</th><th>name</th><th>args</th>"
        "<th>result</th><th>identity</th></tr>",
        *(
            f"<tr><td>{_e(e.at)}</td><td>{_e(e.kind)}</td><td>{_e(e.name)}</td><td>{_e(e.args)}</td>"
            f"<td>{_e(e.result)}</td><td>{_e(e.identity)}</td></tr>"
            for e in report.controls
        ),
        "</table>",
        "<h2>Infrastructure incidents (retried or failed activities)</h2><table><tr><th>at</th>"
        "<th>workflow</th><th>activity</th><th>attempts</th><th>outcome</th><th>last failure</th></tr>",
        *(
            f"<tr><td>{_e(i.at)}</td><td>{_e(i.workflow_id)}</td><td>{_e(i.activity)}</td>"
            f"<td class='num'>{i.attempts}</td><td>{_e(i.outcome)}</td><td>{_e(i.last_failure)}</td></tr>"
            for i in report.incidents
        ),
        "</table>",
        "<h2>Runs</h2><table><tr><th>workflow</th><th>run</th><th>type</th><th>status</th>"
        "<th>events</th></tr>",
        *(
            f"<tr><td>{_e(r.workflow_id)}</td><td><code>{_e(r.run_id)}</code></td>"
            f"<td>{_e(r.workflow_type)}</td><td>{_e(r.status)}</td><td class='num'>{r.events}</td></tr>"
            for r in report.runs
        ),
        "</table></body></html>",
    ]
    return "\n".join(parts)


__all__ = ["FINAL_STYLE", "plots", "render_html"]
