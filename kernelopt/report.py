"""The campaign report a user reads: outcome, ceiling, and every decision with its reason."""

from __future__ import annotations

from kernelopt.compile.triage import CEILING_CAP
from kernelopt.contracts import Decision, Outcome
from kernelopt.contracts.compiled import SearchMode
from kernelopt.contracts.problem import ProblemKind


def _fmt(value: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def baseline_name(o: Outcome, quote: str = "`") -> str:
    """What the speedup is measured against: torch.compile, or the file's own kernel."""
    mode = f"({quote}{o.compile_mode}{quote})"
    if o.kind == ProblemKind.MODULE:
        return f"torch.compile {mode}"
    return f"the file's own {o.kind.value.capitalize()} kernel {mode}"


def ceiling_text(value: float | None) -> str:
    """A model ceiling; the cap that stands for 'no bound' (f = 0, S = inf) reads as such."""
    if value is None:
        return "-"
    return "unbounded" if value >= CEILING_CAP else f"{value:.3f}x"


def triage_lines(o: Outcome) -> list[str]:
    """Amdahl's ceiling, and in single-kernel mode why the measured f does not bound it."""
    t = o.triage
    if t is None:
        return []
    measured = f"{t.library_fraction:.3f} ({t.library_ms:.4f} of {t.total_ms:.4f} ms)"
    if o.mode == SearchMode.SINGLE:
        head = (
            "Single-kernel mode: the whole forward is the target and nothing stays frozen, so "
            f"the ceiling uses f = 0. Time outside Inductor's Triton kernels, for the record: "
            f"{measured}. Verdict: {t.verdict}."
        )
    else:
        head = f"Library fraction f = {measured}. Verdict: {t.verdict}."
    need = (
        f"{t.required_speedup:.2f}x"
        if t.required_speedup is not None
        else "impossible (f >= 1/gamma)"
    )
    return [
        "## Triage (Amdahl on the frozen dispatch graph)",
        "",
        head,
        "",
        "| Triton speedup S | 2 | 5 | 10 | inf |",
        "|---|---|---|---|---|",
        "| model ceiling | "
        + " | ".join(ceiling_text(t.ceilings.get(k)) for k in ("2", "5", "10", "inf"))
        + " |",
        "",
        f"Triton speedup needed for gamma: {need}",
        "",
    ]


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
        f"**Outcome: {o.category.value}** -- speedup {o.speedup:.3f}x over {baseline_name(o)}. "
        f"{o.reason}",
        "",
        "| | value |",
        "|---|---|",
        f"| eager | {_fmt(o.eager_ms, '.4f', ' ms')} |",
        f"| baseline | {_fmt(o.baseline_ms, '.4f', ' ms')} ({(o.baseline_note or o.compile_mode).replace('|', '/')}) |",
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
    lines += triage_lines(o)
    if o.model_verdicts:
        trials = o.model_trials if len(o.model_trials) == len(o.model_verdicts) else None
        lines += [
            "## Model-level gates",
            "",
            "A target's best winner goes first; if the whole model rejects it, its runners-up "
            "follow. Each row is the gate that decided: a `performance` row means the "
            "re-stitched model already passed `model` (gate 3, float64 end to end).",
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
