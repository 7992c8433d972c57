"""The campaign report a user reads: outcome, ceiling, and every decision with its reason."""

from __future__ import annotations

from kernelopt.contracts import Decision, Outcome


def _fmt(value: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _decision(d: Decision) -> str:
    if d.retime:
        return "re-timed" if d.accepted else "dropped at re-timing"
    return "passed" if d.accepted else "rejected"


def render_markdown(outcome: Outcome, decisions: list[Decision]) -> str:
    """A self-contained Markdown report of one campaign."""
    o = outcome
    lines = [
        f"# kernelopt campaign `{o.campaign_id}`: {o.problem}",
        "",
        f"**Outcome: {o.category.value}** -- speedup {o.speedup:.3f}x over torch.compile "
        f"(`{o.compile_mode}`). {o.reason}",
        "",
        "| | value |",
        "|---|---|",
        f"| eager | {_fmt(o.eager_ms, '.4f', ' ms')} |",
        f"| compiled baseline | {_fmt(o.baseline_ms, '.4f', ' ms')} |",
        f"| returned model | {_fmt(o.optimized_ms or o.baseline_ms, '.4f', ' ms')} |",
        f"| proposer | {o.proposer or '-'} |",
        f"| search mode | {o.mode.value if o.mode else '-'} ({o.mode_reason or 'n/a'}) |",
        f"| replaced | {', '.join(o.replaced) or 'nothing (baseline returned)'} |",
        f"| candidates tried / passed gates 1-2 | {o.candidates_tried} / {o.candidates_accepted} |",
        f"| tokens / USD / GPU-s / wall-s | {o.used.tokens} / {o.used.usd:.4f} / "
        f"{o.used.gpu_seconds:.1f} / {o.used.wall_seconds:.1f} |",
        f"| GPU, torch, triton | {o.gpu_name or '-'}, {o.torch_version or '-'}, "
        f"{o.triton_version or '-'} |",
        "",
    ]
    if o.triage is not None:
        t = o.triage
        lines += [
            "## Triage (Amdahl on the frozen dispatch graph)",
            "",
            f"Library fraction f = {t.library_fraction:.3f} "
            f"({t.library_ms:.4f} of {t.total_ms:.4f} ms). Verdict: {t.verdict}.",
            "",
            "| Triton speedup S | 2 | 5 | 10 | inf |",
            "|---|---|---|---|---|",
            "| model ceiling | "
            + " | ".join(_fmt(t.ceilings.get(k), ".3f", "x") for k in ("2", "5", "10", "inf"))
            + " |",
            "",
            "Triton speedup needed for gamma: "
            + (
                f"{t.required_speedup:.2f}x"
                if t.required_speedup is not None
                else "impossible (f >= 1/gamma)"
            ),
            "",
        ]
    if o.model_verdicts:
        trials = o.model_trials if len(o.model_trials) == len(o.model_verdicts) else None
        lines += [
            "## Model-level gates",
            "",
            "A target's best winner goes first; if the whole model rejects it, its runners-up "
            "follow.",
            "",
            "| candidate | gate | status | reason |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {trials[i] if trials else '-'} | {v.gate.value} | {v.status.value} | "
            f"{v.reason.replace('|', '/')} |"
            for i, v in enumerate(o.model_verdicts)
        ]
        lines.append("")
    lines += [
        "## Decisions",
        "",
        "*passed*: correct on every seed and shape (gates 1-2), so it may seed the search; "
        "only a re-timed winner faster than the baseline goes on to the model-level gates, "
        "and only what passes those is returned.",
        "",
        "| candidate | target | parent | proposer | plan | attempt | decision | gate | kernel ms | reason |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in decisions:
        c = d.candidate
        plan = c.plan.direction if c.plan else "-"
        lines.append(
            f"| {c.id} | {c.target_id} | {c.parent_id or 'root'} | {c.proposer} | {plan} | "
            f"{c.attempt} | {_decision(d)} | {d.deciding_gate or '-'} | "
            f"{_fmt(d.kernel_ms, '.4f')} | {d.reason.replace('|', '/')} |"
        )
    if not decisions:
        lines.append("| - | - | - | - | - | - | - | - | - | no candidates |")
    lines.append("")
    return "\n".join(lines)
