"""Rendering what the agents read: profiles, gate verdicts, iteration outcomes.

Everything is bounded: a prompt carries the distilled profile (never the raw
~60K-token ncu report), the failing gate's own feedback trimmed to a few
thousand characters, and one line per candidate for the summarizer.
"""

from __future__ import annotations

from kernelopt.contracts.search import Analysis, Decision, KernelProfile, ProfileResult
from kernelopt.contracts.verdicts import GateVerdict

MAX_FEEDBACK_CHARS = 4000


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


def render_profile_result(result: ProfileResult | None) -> tuple[str, str]:
    """(profile text, analysis text) for a prompt."""
    if result is None:
        return render_profile(None), render_analysis(None)
    return render_profile(result.profile), render_analysis(result.analysis)


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
        parts.append(_trim(verdict.feedback, MAX_FEEDBACK_CHARS))
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
