"""Gate 1 -- static validation: import, build and one dry-run call, in isolation.

The candidate child runs gates 1 and 2 back to back (one process, one CUDA
context start); its progress markers say which gate a failure belongs to.
Reaching ``static_ok`` means the module imported, ``ModelNew`` was built and
one call ran to a device-wide synchronisation without error.
"""

from __future__ import annotations

from gates.feedback import crash_feedback
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict

STATIC_DONE = "static_ok"


def split_seconds(outcome: ChildOutcome) -> tuple[float, float]:
    """(gate 1, gate 2) shares of the candidate child's wall time, from its markers."""
    times = {p.get("phase"): float(p.get("t", 0.0)) for p in outcome.progress}
    first = min((float(p.get("t", 0.0)) for p in outcome.progress), default=0.0)
    last = max((float(p.get("t", 0.0)) for p in outcome.progress), default=0.0)
    if STATIC_DONE not in times or last <= first:
        return outcome.wall_s, 0.0
    overhead = max(0.0, outcome.wall_s - (last - first))  # interpreter start-up
    static = overhead + times[STATIC_DONE] - first
    return static, max(0.0, outcome.wall_s - static)


def static_verdict(outcome: ChildOutcome, *, timeout_s: float, seconds: float) -> GateVerdict:
    metrics = {
        "child": outcome.summary(),
        "phases": outcome.phases,
        "timeout_s": timeout_s,
    }
    if STATIC_DONE in outcome.phases:
        dry = next((p for p in outcome.progress if p.get("phase") == "dry_run"), None)
        done = next((p for p in outcome.progress if p.get("phase") == STATIC_DONE), None)
        if dry and done:
            metrics["dry_run_seconds"] = round(float(done["t"]) - float(dry["t"]), 4)
        return GateVerdict(
            gate=GateName.STATIC,
            status=GateStatus.PASS,
            reason="imported, built and ran one call without error",
            metrics=metrics,
            thresholds={"timeout_s": timeout_s},
            gpu_seconds=seconds,
        )
    metrics["traceback"] = outcome.error_text()
    return GateVerdict(
        gate=GateName.STATIC,
        status=GateStatus.ERROR,
        reason=outcome.describe(),
        metrics=metrics,
        thresholds={"timeout_s": timeout_s},
        feedback=crash_feedback(outcome),
        gpu_seconds=seconds,
    )
