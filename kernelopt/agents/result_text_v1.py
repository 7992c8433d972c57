"""The agents' result texts as they were before ``labelled-agent-feedback``.

A search started before that patch replays its history with these, so every
activity input it scheduled comes out the same (tests/durability/test_replay.py).
Retire with the patch (docs/architecture.md, "Patch retirement").
"""

from __future__ import annotations

from kernelopt.agents.result_text import merged_sibling_lines
from kernelopt.contracts.search import Decision


def render_outcome(decision: Decision) -> str:
    """One line per candidate: what was tried, what happened, how fast."""
    cand = decision.candidate
    what = cand.plan.direction if cand.plan else (cand.label or "variant")
    if decision.accepted:
        speed = f"{decision.speedup:.3f}x" if decision.speedup else "untimed"
        result = f"accepted, per-kernel speedup {speed}"
    else:
        result = f"rejected at {decision.deciding_gate or 'unknown'}: {decision.reason[:200]}"
    retry = f" (retry {cand.attempt})" if cand.attempt else ""
    return f"- {what}{retry}: {result}"


def timing_feedback(decision: Decision, gamma: float = 1.03) -> str:
    """What an accepted candidate was told about its speed, e.g. "correct, 0.93x: slower"."""
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
    """Short lines on sibling candidates of this round (same state), merged with a count."""
    return merged_sibling_lines(decisions, exclude_plan, render_outcome)
