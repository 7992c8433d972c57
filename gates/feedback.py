"""Feedback text for the kernel-writing agent: what failed, the numbers, what to change.

Written for an LLM in a retry-fix loop: one short paragraph per problem,
concrete numbers, the traceback tail when something crashed, and no
tolerance values it could aim just under (it is told *that* it is outside
tolerance and by how much, not how to game the check).
"""

from __future__ import annotations

import signal

from gates.runner import ChildOutcome

_PHASE_WORDS = {
    "start": "starting",
    "load_job": "starting",
    "import": "importing your module (a syntax error, or an error raised at import)",
    "build": "constructing ModelNew(*get_init_inputs())",
    "dry_run": "the first call (Triton compile + launch)",
    "call": "a checked call",
    "static_ok": "a checked call",
}


TAMPERED_INPUTS_FEEDBACK = (
    "Your module wrote to files the checker shares between processes (its input files or "
    "the Triton/Inductor compiler caches). Kernels read their arguments and write only "
    "their outputs; never touch files on disk."
)


def traceback_tail(text: str, lines: int = 25) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def crash_feedback(outcome: ChildOutcome) -> str:
    """Feedback for a candidate process that raised, crashed or hung."""
    where = _PHASE_WORDS.get(outcome.phase, outcome.phase)
    if outcome.status == "timeout":
        head = (
            f"Your candidate did not finish: it was killed after {outcome.wall_s:.0f} s during "
            f"{where}. Look for an infinite loop, a grid that never terminates or a deadlock."
        )
        return head
    if outcome.status == "crashed":
        head = f"Your candidate's process died during {where} ({outcome.describe()}). " + (
            _death_hint(outcome.returncode)
        )
    else:
        head = f"Your candidate raised {outcome.error_type} during {where}."
        if "illegal memory access" in outcome.message or "misaligned address" in outcome.message:
            head += " The GPU reported an illegal memory access: check every load/store mask."
    tail = traceback_tail(outcome.error_text())
    return f"{head}\n\n{tail}" if tail else head


def _death_hint(returncode: int | None) -> str:
    """What a death by this signal or exit code usually means."""
    if returncode is not None and returncode >= 0:
        return (
            "It exited without a result: code under test must return its outputs, never "
            "call exit(), sys.exit() or os._exit()."
        )
    if returncode == -signal.SIGKILL:
        return "It was killed: usually it ran out of memory (allocations too large or growing)."
    return "This usually means an illegal memory access or an out-of-bounds pointer: check masks and offsets."


def bullet_list(items: list[str], limit: int = 6) -> str:
    shown = items[:limit]
    more = len(items) - len(shown)
    text = "\n".join(f"- {item}" for item in shown)
    return text + (f"\n- ... and {more} more" if more > 0 else "")
