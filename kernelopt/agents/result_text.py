"""The results an agent reads, rendered as text: profiles, gate verdicts, iteration outcomes.

Everything is bounded: a prompt carries the distilled profile (never the raw
~60K-token ncu report), the failing gate's own feedback trimmed to a few
thousand characters, and one line per candidate for the summarizer.
"""

from __future__ import annotations

import re

from kernelopt.contracts.search import Analysis, Decision, KernelProfile, ProfileResult
from kernelopt.contracts.verdicts import GateName, GateVerdict

MAX_FEEDBACK_CHARS = 4000
MAX_SIBLINGS = 6
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
    if profile.top_rules:
        lines.append("top ncu findings (by estimated speedup):")
        lines.extend(f"  - {rule}" for rule in profile.top_rules[:3])
    return "\n".join(lines)


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
    """One summarizer line per candidate: what was tried, what happened, how fast."""
    cand = decision.candidate
    what = cand.plan.direction if cand.plan else (cand.label or "variant")
    if decision.accepted:
        speed = f"{decision.speedup:.3f}x" if decision.speedup else "untimed"
        result = f"accepted, per-kernel speedup {speed}"
    else:
        result = f"rejected at {decision.deciding_gate or 'unknown'}: {decision.reason[:200]}"
    retry = f" (retry {cand.attempt})" if cand.attempt else ""
    return f"- {what}{retry}: {result}"


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


def timing_feedback(decision: Decision, gamma: float = 1.03) -> str:
    """What an accepted candidate is told about its speed, e.g. "correct, 0.93x: slower ...".

    The workflow sends it back to the executor (``ExecuteInput.timing``) for one
    more attempt when the candidate passed the checks but did not win.
    """
    speed = decision.speedup
    if speed is None and decision.kernel_ms and decision.baseline_kernel_ms:
        speed = decision.baseline_kernel_ms / decision.kernel_ms
    if speed is None:
        return "Your module is correct, but its timing could not be measured."
    times = ""
    if decision.kernel_ms is not None and decision.baseline_kernel_ms is not None:
        times = (
            f" ({decision.kernel_ms:.4g} ms vs the baseline's {decision.baseline_kernel_ms:.4g} ms)"
        )
    if speed < 1.0:
        verdict = "slower than the baseline"
    elif speed < gamma:
        verdict = f"faster than the baseline, but below the {gamma}x needed to count"
    else:
        verdict = "faster than the baseline"
    return f"Your module is correct, {speed:.2f}x{times}: {verdict}."


def sibling_lines(decisions: list[Decision], exclude_plan: str = "") -> list[str]:
    """Short lines on sibling candidates of this round (same state), for the executor.

    Failures say at which gate and why; successes say how fast.  Identical
    lines are merged with a count, and the executor's own plan is left out.
    """
    counts: dict[str, int] = {}
    for decision in decisions:
        if decision.retime:
            continue
        plan = decision.candidate.plan
        if plan is not None and exclude_plan and plan.direction == exclude_plan:
            continue
        line = render_outcome(decision)
        counts[line] = counts.get(line, 0) + 1
    lines = [line + (f" (x{n})" if n > 1 else "") for line, n in counts.items()]
    return lines[:MAX_SIBLINGS]
