"""The screening activity: the search's untrusted first tier, on the GPU queue.

It runs ``gates.screening`` in a supervised child like the gates (a candidate's
crash or CUDA fault never reaches the worker), and that child runs one ``screen``
job for the round through the gate runner: the gates' own launch path, sandbox
and zygote.  Its estimates only rank candidates; the search sends the ones that
matter through ``gate_candidate``.
"""

from __future__ import annotations

import structlog
from temporalio import activity

from kernelopt.contracts import names
from kernelopt.contracts.screening import ScreenInput, ScreenResult

from .scope import resolve_scope
from .supervise import run_supervised

_MARGIN_S = 120.0  # set-up and re-stitching around the children's own time limits


@activity.defn(name=names.SCREEN)
async def screen_candidates(inp: ScreenInput) -> ScreenResult:
    """Untrusted estimates for a round's candidates, in one sandboxed child unless one is hostile."""
    with structlog.contextvars.bound_contextvars(candidates=len(inp.candidates)):
        # each line may take timeout_s: the round, a fresh child for the disturbed, and at
        # worst one child per candidate (baseline and candidate) after forged lines
        limit = inp.params.timeout_s * (4 * len(inp.candidates) + 2) + _MARGIN_S
        inp = await resolve_scope(inp)
        return await run_supervised(
            "gates.screening:screen_candidates",
            inp,
            ScreenResult,
            timeout_s=limit,
            lease="exclusive",
        )


GPU_ACTIVITIES = [screen_candidates]
