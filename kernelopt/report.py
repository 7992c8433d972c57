"""The campaign report a user reads: outcome, ceiling, targets, and the decisions with reasons.

At hundreds of targets and thousands of candidates a table row per decision is
unreadable, so the tables show the rows that matter most (winners first) and
count the rest by what happened to them; the audit (``kernelopt audit``) keeps
every candidate.
"""

from __future__ import annotations

from collections import Counter

from kernelopt.compile.triage import CEILING_CAP
from kernelopt.contracts import Decision, Outcome, library_choices_of
from kernelopt.contracts.campaign import LIBRARY_PREFIX
from kernelopt.contracts.compiled import SearchMode, TargetHeadroom, TargetKind, TriageResult
from kernelopt.contracts.data_movement import required_speedup
from kernelopt.gpu_busy import BusyTotals, CampaignBusy
from kernelopt.kinds.registry import kind_named

# rows per table before the rest is counted, not listed
DECISIONS_SHOWN = 60
TARGETS_SHOWN = 20


def _fmt(value: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def baseline_name(o: Outcome, quote: str = "`") -> str:
    """What the speedup is measured against: torch.compile, or the file's own kernel."""
    return kind_named(o.kind).baseline_label(o.compile_mode, quote)


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
        *_cutoff_lines(t),
        *_short_kernels_lines(o),
    ]


def _short_kernels_lines(o: Outcome) -> list[str]:
    """Why the built-in plan searched no single kernel, as the campaign recorded it."""
    return [f"Kernel targets: {o.kernels_short}.", ""] if o.kernels_short else []


def _cutoff_lines(t: TriageResult) -> list[str]:
    """The targets triage ranked, largest Amdahl share first, and where it cut the search.

    Each row says the speedup gamma needs of the target and its bandwidth headroom;
    a target short of headroom is searched last, and the lines after the table say why.
    """
    lines = [f"Search cut-off: {t.cutoff}.", ""] if t.cutoff else []
    ranked = [x for x in t.targets if x.kind != TargetKind.FORWARD]
    if len(ranked) < 2:
        return lines + _headroom_lines(t)
    lines += [
        "| rank | target | kind | share of model time | ceiling if infinitely fast "
        "| speedup needed for gamma | bandwidth headroom |",
        "|---|---|---|---|---|---|---|",
    ]
    rooms = {r.target: r for r in t.headroom}
    for i, target in enumerate(ranked[:TARGETS_SHOWN], 1):
        gain = ceiling_text(1.0 / (1.0 - target.share)) if target.share < 1.0 else "unbounded"
        need = required_speedup(target.share, t.gamma)
        lines.append(
            f"| {i} | {target.id} | {target.kind.value} | {target.share:.2%} | {gain} "
            f"| {_fmt(need, '.3f', 'x')} | {_headroom_cell(rooms.get(target.id))} |"
        )
    rest = ranked[TARGETS_SHOWN:]
    if rest:
        lines.append(
            f"| ... | {len(rest)} more searched targets | | "
            f"{sum(x.share for x in rest if x.kind == TargetKind.KERNEL):.2%} (kernel targets) "
            "| | | |"
        )
    if t.deferred_targets:
        lines.append(
            f"| - | {len(t.deferred_targets)} targets below the cut-off, not searched | | "
            f"{t.deferred_share:.2%} | | | |"
        )
    lines.append("")
    return lines + _headroom_lines(t)


def _headroom_cell(room: TargetHeadroom | None) -> str:
    """A target's bandwidth headroom, marked when it is short of the speedup gamma needs."""
    if room is None or room.headroom is None:
        return "-"
    return f"{room.headroom:.2f}x" + (" (short: searched last)" if room.short else "")


def _headroom_lines(t: TriageResult) -> list[str]:
    """The headroom rule in words, then why each target short of headroom is searched last."""
    if not t.headroom_rule:
        return []
    lines = [f"Bandwidth headroom: {t.headroom_rule}.", ""]
    short = [r for r in t.headroom if r.short]
    lines += [f"- `{r.target}`: {r.reason}" for r in short]
    return [*lines, ""] if short else lines


def _decision(d: Decision) -> str:
    if d.retime:
        return "re-timed" if d.accepted else "dropped at re-timing"
    return "passed" if d.accepted else "rejected"


def shown_decisions(decisions: list[Decision], limit: int = DECISIONS_SHOWN) -> list[Decision]:
    """At most ``limit`` rows: winners fastest first, then re-timings, then the newest others."""
    if len(decisions) <= limit:
        return decisions
    newest = sorted(decisions, key=lambda d: d.at, reverse=True)
    group = {"passed": 0, "re-timed": 1, "dropped at re-timing": 2, "rejected": 3}
    ranked = sorted(newest, key=lambda d: (group[_decision(d)], -(d.speedup or 0.0)))
    return ranked[:limit]


def _remainder(decisions: list[Decision]) -> str:
    """'1,200 rejected (correctness 900, compile 300), 40 passed': what the hidden rows hold."""
    kinds = Counter(_decision(d) for d in decisions)
    gates = Counter(d.deciding_gate or "-" for d in decisions if _decision(d) == "rejected")
    return tally(kinds, gates)


def tally(kinds: Counter[str], gates: Counter[str]) -> str:
    """'1,200 rejected (correctness 900, compile 300), 40 passed': each kind, most first,
    and the rejections by deciding gate -- how the report and the audit count hidden rows."""
    parts = []
    for kind, n in kinds.most_common():
        text = f"{n:,} {kind}"
        if kind == "rejected" and gates:
            text += " (" + ", ".join(f"{g} {c:,}" for g, c in gates.most_common()) + ")"
        parts.append(text)
    return ", ".join(parts)


def targets_lines(decisions: list[Decision]) -> list[str]:
    """One row per searched target (best first), the rest counted."""
    by_target: dict[str, list[Decision]] = {}
    for d in decisions:
        by_target.setdefault(d.candidate.target_id, []).append(d)
    if len(by_target) < 2:
        return []
    rows = []
    for target, ds in by_target.items():
        tried = [d for d in ds if not d.retime]
        passed = [d for d in tried if d.accepted]
        best = max((d.speedup for d in passed if d.speedup is not None), default=None)
        rows.append((target, len(tried), len(passed), best))
    rows.sort(key=lambda r: (-(r[3] or 0.0), -r[1], r[0]))
    lines = [
        "## Targets",
        "",
        f"{len(rows)} targets searched, best kernel speedup first.",
        "",
        "| target | candidates | passed gates 1-2 | best kernel speedup |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {t} | {n:,} | {p:,} | {_fmt(b, '.3f', 'x')} |" for t, n, p, b in rows[:TARGETS_SHOWN]
    ]
    rest = rows[TARGETS_SHOWN:]
    if rest:
        lines.append(
            f"| {len(rest)} more targets | {sum(r[1] for r in rest):,} | "
            f"{sum(r[2] for r in rest):,} | {_fmt(max((r[3] or 0.0) for r in rest) or None, '.3f', 'x')} |"
        )
    lines.append("")
    return lines


def library_lines(o: Outcome, decisions: list[Decision]) -> list[str]:
    """The opt-in library choices, apart from the kernel work: they change f itself.

    Shown when the returned model makes any, or when the search tried any, so a
    user who opted in sees what came of it either way.
    """
    tried = [d for d in decisions if d.candidate.label.startswith(LIBRARY_PREFIX) and not d.retime]
    if not o.library_choices and not tried:
        return []
    kept = ", ".join(f"`{c}`" for c in o.library_choices) or "none (no library choice was kept)"
    lines = [
        "## Library choices (change f)",
        "",
        "Opt-in choices of how cuBLAS/cuDNN calls run. They change the library fraction f "
        "that the triage above measured on the baseline, so their gain is not kernel work; "
        "the returned model carries them in its own code (scoped to its forward), which is "
        "how a deployment reproduces them.",
        "",
        f"Kept: {kept}.",
        "",
    ]
    if tried:
        lines += ["| candidate | choices | decision | kernel speedup |", "|---|---|---|---|"]
        lines += [
            f"| {d.candidate.id} | {', '.join(library_choices_of([d.candidate.label]))} | "
            f"{_decision(d)} | {_fmt(d.speedup, '.3f', 'x')} |"
            for d in tried[:TARGETS_SHOWN]
        ]
        lines.append("")
    return lines


BUSY_TARGET = 80.0  # issue 22 point 4: the GPU at least this busy (%) during the search


def _busy_row(label: str, t: BusyTotals, seconds: float | None = None) -> str:
    over = t.seconds if seconds is None else seconds
    above = None if t.busy_fraction is None else 100 * t.busy_fraction
    return (
        f"| {label} | {_fmt(t.mean_gpu, '.0f', '%')} | {_fmt(t.mean_memory, '.0f', '%')} | "
        f"{_fmt(above, '.0f', '%')} | {t.samples:,} | "
        f"{over:.1f} |"
    )


def gpu_busy_lines(busy: CampaignBusy | None) -> list[str]:
    """How busy the GPU was while the campaign searched (NVML samples of the GPU worker).

    The headline is taken over the search's span, idle gaps between its GPU
    activities included, because those gaps are what overlapping CPU work removes.
    """
    lines = ["## GPU utilisation (NVML)", ""]
    if busy is None or not busy.measured:
        why = busy.reason if busy is not None else "no GPU worker recorded samples for it"
        return [*lines, f"GPU busy during search: not measured ({why}).", ""]
    span = busy.search_span
    if busy.search_activities == 0 or span.samples == 0:
        head = "GPU busy during search: no samples (no search activity ran on the GPU)."
    else:
        mean = span.mean_gpu or 0.0
        verdict = "meets" if mean >= BUSY_TARGET else "is below"
        head = (
            f"GPU busy during search: {mean:.0f}% ({span.samples:,} samples over "
            f"{busy.search_span_seconds:.1f} s); this {verdict} the {BUSY_TARGET:.0f}% target."
        )
    return [
        *lines,
        head,
        "",
        "Mean of NVML's utilisation rates (GPU: time a kernel ran; memory: time device "
        "memory was read or written), sampled by the GPU worker. The search span runs from "
        "the first search activity (profile, screening, gates 1-2) to the last, gaps "
        "included.",
        "",
        "| while | GPU | memory | samples above 0 | samples | seconds |",
        "|---|---|---|---|---|---|",
        _busy_row("search span", span, busy.search_span_seconds),
        _busy_row(f"search activities ({busy.search_activities})", busy.while_searching),
        _busy_row(f"all GPU activities ({busy.activities})", busy.all_activities),
        "",
    ]


def render_markdown(
    outcome: Outcome, decisions: list[Decision], gpu_busy: CampaignBusy | None = None
) -> str:
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
        f"| returned model | {_fmt(o.optimized_ms or o.baseline_ms, '.4f', ' ms')}"
        f"{', ' + o.returned_form() if o.wrapper else ''} |",
        f"| proposer | {o.proposer or '-'} |",
        f"| search mode | {o.mode.value if o.mode else '-'} ({o.mode_reason or 'n/a'}) |",
        f"| replaced | {o.replaced_text() or 'nothing (baseline returned)'} |",
        f"| library choices (change f) | {', '.join(o.library_choices) or '-'} |",
        f"| candidates tried / passed gates 1-2 | {o.candidates_tried} / {o.candidates_accepted} |",
        f"| tokens / USD / GPU-s / wall-s | {o.used.tokens} / {o.used.usd:.4f} / "
        f"{o.used.gpu_seconds:.1f} / {o.used.wall_seconds:.1f} |",
        f"| GPU, torch, triton | {o.gpu_name or '-'}, {o.torch_version or '-'}, "
        f"{o.triton_version or '-'} |",
        "",
    ]
    lines += triage_lines(o)
    lines += gpu_busy_lines(gpu_busy)
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
    lines += targets_lines(decisions)
    lines += library_lines(o, decisions)
    shown = shown_decisions(decisions)
    lines += [
        "## Decisions",
        "",
        "*passed*: correct on every seed and shape (gates 1-2), so it may seed the search; "
        "only a re-timed winner faster than the baseline goes on to the model-level gates, "
        "and only what passes those is returned.",
        "",
    ]
    if shown is not decisions:
        lines += [
            f"{len(decisions):,} decisions; the {DECISIONS_SHOWN} shown are the winners "
            "(fastest first), then the newest others. Not shown: "
            f"{_remainder(_hidden(decisions, shown))}. Every candidate: "
            f"`kernelopt audit {o.campaign_id}`.",
            "",
        ]
    lines += [
        "| candidate | target | parent | proposer | plan | attempt | decision | gate | kernel ms | reason |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in shown:
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


def _hidden(decisions: list[Decision], shown: list[Decision]) -> list[Decision]:
    kept = {id(d) for d in shown}
    return [d for d in decisions if id(d) not in kept]
