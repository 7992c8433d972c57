"""Temporal activities for compile, segment, triage and re-stitch.

GPU activities run their library entry point in a supervised child process
(``run_supervised``): a CUDA fault or hang kills the child, never the worker.
Segmentation is pure text parsing, so it runs in-process on the CPU queue.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from kernelopt.contracts import (
    CompileInput,
    CompileResult,
    RestitchInput,
    RestitchResult,
    SegmentInput,
    SegmentResult,
    TriageInput,
    TriageResult,
    names,
)
from kernelopt.errors import DeterministicError
from kernelopt.store import open_store

from .heartbeat import in_thread
from .supervise import run_supervised


@activity.defn(name=names.COMPILE)
async def compile_problem(inp: CompileInput) -> CompileResult:
    """The baseline, compiled by the problem's kind (Inductor capture for modules); cached."""
    return await run_supervised("kernelopt.kinds.registry:compile_problem", inp, CompileResult)


@activity.defn(name=names.SEGMENT)
async def segment(inp: SegmentInput) -> SegmentResult:
    """Library calls frozen, Triton kernels and fusion groups exposed (pure text)."""
    from kernelopt.compile.segment import segment as segment_impl

    try:
        return await in_thread(segment_impl, inp, open_store())
    except DeterministicError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc


@activity.defn(name=names.TRIAGE)
async def triage(inp: TriageInput) -> TriageResult:
    """Per-kernel GPU time, library fraction f, Amdahl ceiling, verdict."""
    return await run_supervised("kernelopt.compile.triage:triage", inp, TriageResult)


@activity.defn(name=names.RESTITCH)
async def restitch(inp: RestitchInput) -> RestitchResult:
    """Put replacements back into the wrapper, run it on the captured args, compare."""
    return await run_supervised("kernelopt.compile.restitch:restitch", inp, RestitchResult)


GPU_ACTIVITIES = [compile_problem, triage, restitch]
CPU_ACTIVITIES = [segment]
