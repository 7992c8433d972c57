"""Temporal activities for the verification cascade.

Both run their library entry point (``gates.campaign``) in a supervised child
(``run_supervised``), which itself spawns one fresh process per reference,
candidate run and timing measurement: a candidate's crash, hang or CUDA fault
ends a grandchild and comes back as a verdict, never as a worker crash.  A
rejected candidate is a *result*; only infrastructure faults raise.
"""

from __future__ import annotations

import structlog
from temporalio import activity

from kernelopt.contracts import (
    CandidateGateInput,
    CandidateGateResult,
    ModelGateInput,
    ModelGateResult,
    names,
)

from .scope import resolve_scope
from .supervise import run_supervised

# Headroom over the gates' own timeouts: the reference child, the candidate child
# (bounded by ``timeout_s``) and the timing children all run inside one activity.
_CANDIDATE_MARGIN_S = 600.0
_MODEL_MARGIN_S = 900.0


@activity.defn(name=names.GATE_CANDIDATE)
async def gate_candidate(inp: CandidateGateInput) -> CandidateGateResult:
    """Gates 1-2 (static, multi-seed correctness) plus forward timings for ranking."""
    with structlog.contextvars.bound_contextvars(candidate_id=inp.candidate_id):
        inp = await resolve_scope(inp)
        return await run_supervised(
            "gates.campaign:gate_candidate",
            inp,
            CandidateGateResult,
            timeout_s=inp.timeout_s * 2 + _CANDIDATE_MARGIN_S,
        )


@activity.defn(name=names.GATE_MODEL)
async def gate_model(inp: ModelGateInput) -> ModelGateResult:
    """Gates 3-4 (V_model float64 rule, V_perf in fresh processes) on a re-stitched model."""
    return await run_supervised(
        "gates.campaign:gate_model",
        inp,
        ModelGateResult,
        timeout_s=inp.timeout_s + _MODEL_MARGIN_S,
    )


GPU_ACTIVITIES = [gate_candidate, gate_model]
CPU_ACTIVITIES: list = []
