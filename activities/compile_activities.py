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
    ScopeSegmentInput,
    SegmentInput,
    SegmentRef,
    SegmentResult,
    SegmentTargetsInput,
    SegmentTargetsResult,
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


@activity.defn(name=names.SEGMENT_TO_STORE)
async def segment_to_store(inp: SegmentInput) -> SegmentRef:
    """Segment as ``segment`` does, but hand back a reference: the result stays in the store."""
    from kernelopt.compile.segment import segment as segment_impl
    from kernelopt.compile.segment_store import store_segment

    def run() -> SegmentRef:
        store = open_store()
        result = segment_impl(inp, store)
        return store_segment(result, store, f"{inp.compiled.problem.name}.segment.json")

    try:
        return await in_thread(run)
    except DeterministicError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc


@activity.defn(name=names.SCOPE_SEGMENT)
async def scope_segment(inp: ScopeSegmentInput) -> SegmentResult:
    """One target's part of a stored segmentation: what its search carries."""
    from kernelopt.compile.segment_store import scoped

    return await in_thread(scoped, inp, open_store())


@activity.defn(name=names.SEGMENT_TARGETS)
async def segment_targets(inp: SegmentTargetsInput) -> SegmentTargetsResult:
    """The built-in proposer's targets, read from a stored segmentation."""
    from kernelopt.compile.segment_store import load_segment
    from kernelopt.proposer.targets import builtin_targets

    def run() -> SegmentTargetsResult:
        return builtin_targets(inp, load_segment(inp.segment, open_store()))

    return await in_thread(run)


@activity.defn(name=names.TRIAGE)
async def triage(inp: TriageInput) -> TriageResult:
    """Per-kernel GPU time, library fraction f, Amdahl ceiling, verdict."""
    return await run_supervised("kernelopt.compile.triage:triage", inp, TriageResult)


@activity.defn(name=names.RESTITCH)
async def restitch(inp: RestitchInput) -> RestitchResult:
    """Put replacements back into the wrapper, run it on the captured args, compare."""
    return await run_supervised("kernelopt.compile.restitch:restitch", inp, RestitchResult)


GPU_ACTIVITIES = [compile_problem, triage, restitch]
CPU_ACTIVITIES = [segment, segment_to_store, scope_segment, segment_targets]
