"""The results an agent reads, rendered as text: profiles, gate verdicts, iteration outcomes.

Everything is bounded: a prompt carries the distilled profile (never the raw
~60K-token ncu report), the failing gate's own feedback trimmed to a few
thousand characters, and one line per candidate for the summarizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kernelopt.contracts.search import Analysis, Decision, KernelProfile, ProfileResult
from kernelopt.contracts.verdicts import GateName, GateVerdict

MAX_FEEDBACK_CHARS = 4000
MAX_SIBLINGS = 6
MAX_APPROACH_CHARS = 300  # the plan text the summarizer reads per candidate
MAX_SIBLING_APPROACH_CHARS = 160
# the gates' call-name bullets: "- call seed0: ..." / "- calls seed0, heldout: ..."
_BULLET = re.compile(r"^- (?:call|calls) (?P<names>[\w, -]+?): (?P<text>.*)$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
_HOLDOUT_HINT = re.compile(
    r"\s*This is a held-out input shape \(another batch size than get_inputs\(\)\): "
    r"read sizes from the tensors instead of hard-coding them\."
)
# held-out input sets as the gates name them: "heldout" (seed), "holdout<k>", "holdout_derived"
HOLDOUT_PREFIXES = ("heldout", "holdout")
HOLDOUT_HINT = (
    "Only held-out inputs fail (another seed or batch size than get_inputs()): read sizes "
    "from the tensors instead of hard-coding them."
)


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head - 40
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def _fmt(value: float | int | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value}{unit}"
    return f"{value:.{digits}f}{unit}"


def render_profile(profile: KernelProfile | None) -> str:
    """The distilled profile as a few short lines."""
    if profile is None:
        return "(no profile)"
    lines = [
        f"source: {profile.source}" + (f" ({profile.note})" if profile.note else ""),
        f"duration: {_fmt(profile.duration_us, ' us', 2)}",
        f"SOL compute: {_fmt(profile.sol_compute_pct, '%')}, "
        f"SOL memory: {_fmt(profile.sol_memory_pct, '%')}",
        f"registers/thread: {_fmt(profile.registers_per_thread)}, spills: {_fmt(profile.spills)}",
        f"achieved occupancy: {_fmt(profile.achieved_occupancy_pct, '%')}",
    ]
    rules = relevant_rules(profile.top_rules)
    if rules:
        lines.append("top ncu findings (by estimated speedup):")
        lines.extend(f"  - {rule}" for rule in rules[:3])
    return "\n".join(lines)


# ncu findings that never bear on a candidate (fp32 data the L2 cannot compress), by text
_IRRELEVANT_RULES = ("L2 Compression",)


def relevant_rules(rules: list[str]) -> list[str]:
    """The ncu findings worth a prompt's lines: stored profiles still carry the L2
    compression finding, which no kernel rewrite here can act on."""
    return [r for r in rules if not any(noise in r for noise in _IRRELEVANT_RULES)]


def render_analysis(analysis: Analysis | None) -> str:
    if analysis is None:
        return "(none)"
    text = f"{analysis.bottleneck.value}: {analysis.reasoning}"
    return f"{text} Advice: {analysis.advice}" if analysis.advice else text


MAX_REASON_CHARS = 240


def profile_failure(profile: KernelProfile) -> str:
    """Why a state has no profile, in one line: the first harness's reason, not its traceback."""
    lines = [line.strip() for line in profile.note.splitlines() if line.strip()]
    reason = lines[0].split("; ")[0] if lines else "no reason recorded"
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."


def with_baseline(
    profile: ProfileResult | None, root: ProfileResult | None
) -> ProfileResult | None:
    """The profile a prompt shows for a state: its own, with the root's beside it when it has none.

    A state that could not be profiled (``source == "none"``) would show every
    number as n/a; the baseline's last good profile is the nearest evidence.
    """
    if profile is None or profile.profile.source != "none" or root is None or root is profile:
        return profile
    if root.profile.source == "none":
        return profile
    return profile.model_copy(update={"baseline": root.model_copy(update={"baseline": None})})


def render_profile_result(result: ProfileResult | None) -> tuple[str, str]:
    """(profile text, analysis text) for a prompt.

    A state that could not be profiled gets one line saying why and, when
    known, the baseline's profile and analysis, labelled as the baseline's.
    """
    if result is None:
        return render_profile(None), render_analysis(None)
    if result.profile.source != "none":
        return render_profile(result.profile), render_analysis(result.analysis)
    head = f"this state could not be profiled: {profile_failure(result.profile)}"
    base = result.baseline
    if base is None:
        return head, render_analysis(result.analysis)
    text = f"{head}\nthe baseline's last profile (the root state's, not this state's):\n"
    return text + render_profile(base.profile), "(the baseline's) " + render_analysis(base.analysis)


def render_verdict_feedback(verdicts: list[GateVerdict], error: str = "") -> str:
    """What the executor is told after a rejection: the failing gate, its reason and feedback."""
    if error:
        return f"Your reply could not be used: {_trim(error, MAX_FEEDBACK_CHARS)}"
    failed = [v for v in verdicts if not v.passed]
    if not failed:
        return "The module was rejected without a failing gate verdict (no details)."
    verdict = failed[0]
    parts = [f"Gate `{verdict.gate.value}` said {verdict.status.value}: {verdict.reason}"]
    if verdict.feedback:
        # a held-out set failing gate 3 (float64) is a precision error, not a hard-coded size
        hint = verdict.gate != GateName.MODEL
        parts.append(_trim(merge_failures(verdict.feedback, hint), MAX_FEEDBACK_CHARS))
    numbers = {k: v for k, v in verdict.metrics.items() if isinstance(v, int | float | str)}
    if numbers:
        shown = ", ".join(f"{k}={v}" for k, v in list(numbers.items())[:8])
        parts.append(f"Measured: {shown}")
    return "\n\n".join(parts)


def render_outcome(decision: Decision) -> str:
    """One line per candidate: what was tried, what happened, with the timed numbers labelled.

    The speed is the whole forward's (that is what gate 4 times), so the line says so and
    gives the noise band: a ratio inside it is not a result to learn from.
    """
    cand = decision.candidate
    what = cand.plan.direction if cand.plan else (cand.label or "variant")
    if decision.accepted:
        numbers = measurement_text(decision)
        result = f"correct, {numbers}" if numbers else "correct, untimed"
        against = parent_comparison(decision, "its")
        if numbers and against:
            result += f"; {against}"
    else:
        result = f"rejected at {decision.deciding_gate or 'unknown'}: {decision.reason[:200]}"
    retry = f" (retry {cand.attempt})" if cand.attempt else ""
    return f"- {what}{retry}: {result}"


def parent_comparison(decision: Decision, whose: str = "its") -> str:
    """The candidate against the state it was built on, when that state is not Inductor's:
    1.096x over Inductor from a 1.146x state is a step back, not a gain."""
    parent = decision.candidate.parent_speedup
    speed = _forward_speedup(decision, timing_numbers(decision))
    if not parent or parent <= 0 or speed is None:
        return ""
    ratio = speed / parent
    if ratio < 0.9995:
        direction = f"slower than the code {whose} change started from"
    elif ratio > 1.0005:
        direction = f"faster than the code {whose} change started from"
    else:
        direction = f"as fast as the code {whose} change started from"
    return (
        f"{ratio:.3f}x the state it was built on (which measured {parent:.3f}x over "
        f"Inductor in its own gate run): {direction}"
    )


def _approach(decision: Decision, limit: int) -> str:
    plan = decision.candidate.plan
    if plan is None or not plan.description.strip():
        return ""
    text = " ".join(plan.description.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_FENCED = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def change_note(reply: str, limit: int = MAX_APPROACH_CHARS) -> str:
    """What a reply says it changed: its prose outside the code blocks, in one short line."""
    text = " ".join(_FENCED.sub(" ", reply).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def render_summary_outcome(decision: Decision, note: str = "") -> str:
    """The summarizer's record of one candidate: its line, the plan it was asked to follow
    (short, marked as the planner's guess) and, when known, what its author said it changed.

    Without the plan the summarizer guessed what each candidate did and wrote the guesses
    down as lessons; with the plan alone it credited a retry's result to the plan the retry
    had dropped.
    """
    line = render_outcome(decision)
    approach = _approach(decision, MAX_APPROACH_CHARS)
    if approach:
        line += (
            f"\n  plan it was asked to follow (the planner's assumptions, unverified): {approach}"
        )
    if note:
        line += f"\n  what its author says it changed: {note}"
    return line


def _shape_key(text: str) -> str:
    return _NUMBER.sub("#", _HOLDOUT_HINT.sub("", text)).strip()


def merge_failures(feedback: str, holdout_hint: bool = True) -> str:
    """One line per kind of failure: bullets equal up to their numbers are merged.

    The gates already merge identical texts; calls that fail the same way with
    different numbers (another error size, another shape) still come as one
    bullet each.  The merged line keeps the first call's text and names every
    call.  The held-out hint stays only when held-out calls alone fail: if the
    base inputs fail too, hard-coded sizes are not the problem (and never with
    ``holdout_hint`` False, for failures that sizes cannot cause).
    """
    lines = feedback.splitlines()
    groups: dict[str, list[tuple[list[str], str]]] = {}
    order: list[str | int] = []
    for i, line in enumerate(lines):
        match = _BULLET.match(line)
        if not match:
            order.append(i)
            continue
        key = _shape_key(match.group("text"))
        names = [n.strip() for n in match.group("names").split(",") if n.strip()]
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((names, match.group("text")))
    failing = [n for entries in groups.values() for names, _ in entries for n in names]
    only_holdout = (
        holdout_hint and bool(failing) and all(n.startswith(HOLDOUT_PREFIXES) for n in failing)
    )
    out: list[str] = []
    hinted = False
    for item in order:
        if isinstance(item, int):
            out.append(lines[item])
            continue
        entries = groups[item]
        names = [n for names, _ in entries for n in names]
        text = _HOLDOUT_HINT.sub("", entries[0][1]).strip()
        if len(entries) > 1:
            text += f" (and {len(entries) - 1} more like it, numbers differ)"
        if only_holdout and not hinted:
            text += " " + HOLDOUT_HINT
            hinted = True
        label = "call" if len(names) == 1 else "calls"
        out.append(f"- {label} {', '.join(names)}: {text}")
    return "\n".join(out)


def timing_numbers(decision: Decision) -> dict[str, Any]:
    """Gate 4's numbers for a decision: its ``timing``, else a performance verdict's metrics.

    Empty when the candidate was not timed; the texts below then quote only the two
    forward times the decision itself carries.
    """
    if decision.timing:
        return dict(decision.timing)
    for verdict in decision.verdicts:
        if verdict.gate == GateName.PERFORMANCE and verdict.metrics.get("decision"):
            return dict(verdict.metrics)  # the same keys, unabridged
    return {}


def _ms(value: float) -> str:
    return f"{value * 1000:.1f} us" if value < 1.0 else f"{value:.4g} ms"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _one_round(timing: dict[str, Any]) -> bool:
    """Whether one timing round decided: its spread is no noise estimate.  Decisions recorded
    before gate 4 flagged every single round show it as an interval of one ratio."""
    decision = timing.get("decision") or {}
    low, high = _num(decision.get("speedup_low")), _num(decision.get("speedup_high"))
    return bool(timing.get("one_round")) or (low is not None and low == high)


def _within_noise(speedup: float, timing: dict[str, Any]) -> bool | None:
    """Whether the forward's ratio is inside its measured noise (None: noise unknown)."""
    decision = timing.get("decision") or {}
    if _one_round(timing):
        return None
    low, high = _num(decision.get("speedup_low")), _num(decision.get("speedup_high"))
    if low is not None and high is not None and low <= high:
        return low <= 1.0 <= high
    noise = decision.get("noise")
    if isinstance(noise, int | float):
        return abs(speedup - 1.0) <= noise
    return None


def _forward_speedup(decision: Decision, timing: dict[str, Any]) -> float | None:
    judged = timing.get("decision") or {}
    cand_ms = _num(judged.get("candidate_ms")) or decision.kernel_ms
    base_ms = _num(judged.get("baseline_ms")) or decision.baseline_kernel_ms
    speed = _num(judged.get("speedup")) or decision.speedup
    if speed is None and cand_ms and base_ms:
        speed = base_ms / cand_ms
    return speed


def measurement_text(decision: Decision, whose: str = "its") -> str:
    """What was timed, labelled: the whole forward's times with the noise band, and the
    forward's kernels alone where a CUDA-graph replay timed them.

    Only numbers the decision carries are quoted; a missing one is left out, never
    estimated.  Empty when the candidate was not timed.
    """
    timing = timing_numbers(decision)
    judged = timing.get("decision") or {}
    cand_ms = _num(judged.get("candidate_ms")) or decision.kernel_ms
    base_ms = _num(judged.get("baseline_ms")) or decision.baseline_kernel_ms
    speed = _forward_speedup(decision, timing)
    if speed is None:
        return ""
    parts = [f"whole-forward speedup {speed:.3f}x"]
    if cand_ms and base_ms:
        parts[0] = (
            f"the whole forward with {whose} kernel in place: {_ms(cand_ms)} vs the baseline's "
            f"{_ms(base_ms)} ({speed:.3f}x)"
        )
    band = []
    noise = judged.get("noise")
    low, high = _num(judged.get("speedup_low")), _num(judged.get("speedup_high"))
    if _one_round(timing):
        band.append("noise unknown (one timing round)")
    else:
        if isinstance(noise, int | float):
            band.append(f"noise {noise:.1%} (spread of the timing rounds)")
        if low is not None and high is not None:
            band.append(f"rounds give {low:.3f}x to {high:.3f}x")
    if band:
        parts.append("; ".join(band))
    within = _within_noise(speed, timing)
    if within is not None:
        parts.append(
            "the difference is within this noise"
            if within
            else "the difference is beyond this noise"
        )
    graphs = timing.get("graph_replay") or {}
    g_base, g_cand = _num(graphs.get("baseline_ms")), _num(graphs.get("candidate_ms"))
    if g_base and g_cand:
        parts.append(
            f"the forward's kernels alone (CUDA-graph replay, no launch overhead): "
            f"{_ms(g_cand)} vs {_ms(g_base)} ({g_base / g_cand:.3f}x)"
        )
    return "; ".join(parts)


def timing_feedback(decision: Decision, gamma: float = 1.03, digits: int | None = None) -> str:
    """What an accepted candidate is told about its speed, with what was timed and its noise.

    ``digits`` prints gamma with the speedup's 3 decimals, so "1.03x ... below the 1.03x"
    cannot be read; None keeps the text of histories from before that patch.

    The workflow sends it back to the executor (``ExecuteInput.timing``) for one
    more attempt when the candidate passed the checks but did not win.  The times are the
    whole re-stitched forward's, which the text says, so they are not read as the kernel's.
    """
    timing = timing_numbers(decision)
    speed = _forward_speedup(decision, timing)
    numbers = measurement_text(decision, "your")
    needed = f"{gamma:g}" if digits is None else f"{gamma:.{digits}f}"
    if speed is None or not numbers:
        return "Your module is correct, but its timing could not be measured."
    if speed < 1.0:
        verdict = "slower than the baseline"
    elif speed < gamma:
        verdict = f"faster than the baseline, but below the {needed}x needed to count"
    else:
        verdict = "faster than the baseline"
    lines = [f"Your module is correct, {speed:.3f}x: {verdict}.", f"Timed: {numbers}."]
    against = parent_comparison(decision, "your")
    if against:
        lines.append(f"Against the code you started from: {against}.")
    within = _within_noise(speed, timing)
    if within:
        lines.append(
            "This difference is within the measurement's noise: it does not show that your "
            "approach is slower or faster than the baseline, so do not drop or keep an idea "
            "on this number alone."
        )
    lines.append(f"The {needed}x needed is for the whole forward, the same level as these times.")
    return "\n".join(lines)


def sibling_lines(decisions: list[Decision], exclude_plan: str = "") -> list[str]:
    """Short lines on sibling candidates of this round (same state), for the executor.

    Failures say at which gate and why; successes give the labelled times and noise; each
    line names the plan it followed, so a retry does not switch to an approach a sibling
    already measured.  Identical lines are merged with a count, and the executor's own plan
    is left out.
    """
    return merged_sibling_lines(decisions, exclude_plan, _sibling_line)


def _sibling_line(decision: Decision) -> str:
    line = render_outcome(decision)
    approach = _approach(decision, MAX_SIBLING_APPROACH_CHARS)
    return f"{line} [plan: {approach}]" if approach else line


def merged_sibling_lines(
    decisions: list[Decision], exclude_plan: str, render: Callable[[Decision], str]
) -> list[str]:
    """``render``'s line for each sibling (re-timings and the executor's own plan left out),
    identical lines merged with a count, at most ``MAX_SIBLINGS``."""
    counts: dict[str, int] = {}
    for decision in decisions:
        if decision.retime:
            continue
        plan = decision.candidate.plan
        if plan is not None and exclude_plan and plan.direction == exclude_plan:
            continue
        line = render(decision)
        counts[line] = counts.get(line, 0) + 1
    lines = [line + (f" (x{n})" if n > 1 else "") for line, n in counts.items()]
    return lines[:MAX_SIBLINGS]
