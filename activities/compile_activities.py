"""Temporal activities for compile, segment, triage and re-stitch.

GPU activities run their library entry point in a supervised child process
(``run_supervised``): a CUDA fault or hang kills the child, never the worker.
Segmentation is pure text parsing, so it runs in-process on the CPU queue.
"""

from __future__ import annotations

from temporalio import activity

from kernelopt import contracts
from kernelopt.contracts import names
from kernelopt.log import get_logger
from kernelopt.store import open_store

from .heartbeat import in_thread, in_thread_final
from .supervise import run_supervised

log = get_logger(__name__)


@activity.defn(name=names.COMPILE)
async def compile_problem(inp: contracts.CompileInput) -> contracts.CompileResult:
    """The baseline, compiled by the problem's kind (Inductor capture for modules); cached.

    Exclusive: max-autotune picks each kernel by timing it, and a pick made beside other
    work is kept in the caches for every later measurement; a baseline slowed that way
    makes every candidate look faster.
    """
    return await run_supervised(
        "kernelopt.kinds.registry:compile_problem",
        inp,
        contracts.CompileResult,
        lease="exclusive",
    )


@activity.defn(name=names.SEGMENT)
async def segment(inp: contracts.SegmentInput) -> contracts.SegmentResult:
    """Library calls frozen, Triton kernels and fusion groups exposed (pure text)."""
    from kernelopt.compile.segment import segment as segment_impl

    return await in_thread_final(segment_impl, inp, open_store())


@activity.defn(name=names.SEGMENT_TO_STORE)
async def segment_to_store(inp: contracts.SegmentInput) -> contracts.SegmentRef:
    """Segment as ``segment`` does, but hand back a reference: the result stays in the store."""
    from kernelopt.compile.segment import segment as segment_impl
    from kernelopt.compile.segment_store import store_segment

    def run() -> contracts.SegmentRef:
        store = open_store()
        result = segment_impl(inp, store)
        return store_segment(result, store, f"{inp.compiled.problem.name}.segment.json")

    return await in_thread_final(run)


@activity.defn(name=names.SCOPE_SEGMENT)
async def scope_segment(inp: contracts.ScopeSegmentInput) -> contracts.SegmentResult:
    """One target's part of a stored segmentation: what its search carries."""
    from kernelopt.compile.segment_store import scoped

    return await in_thread(scoped, inp, open_store())


@activity.defn(name=names.SEGMENT_TARGETS)
async def segment_targets(inp: contracts.SegmentTargetsInput) -> contracts.SegmentTargetsResult:
    """The built-in proposer's targets, read from a stored segmentation."""
    from kernelopt.compile.segment_store import load_segment
    from kernelopt.proposer.targets import builtin_targets

    def run() -> contracts.SegmentTargetsResult:
        return builtin_targets(inp, load_segment(inp.segment, open_store()))

    return await in_thread(run)


@activity.defn(name=names.TRIAGE)
async def triage(inp: contracts.TriageInput) -> contracts.TriageResult:
    """Per-kernel GPU time, library fraction f, Amdahl ceiling, verdict."""
    return await run_supervised(
        "kernelopt.compile.triage:triage", inp, contracts.TriageResult, lease="exclusive"
    )


@activity.defn(name=names.TRIAGE_TO_STORE)
async def triage_to_store(inp: contracts.TriageInput) -> contracts.TriageRef:
    """Triage as ``triage`` does, but hand back a reference: the result stays in the store.

    Stored here, after the child returns, so the GPU child keeps one job (measuring)
    and the reference carries the device seconds the supervisor charged.
    """
    from kernelopt.compile.triage_store import store_triage

    result = await triage(inp)
    name = f"{inp.compiled.problem.name}.triage.json"
    return await in_thread(store_triage, result, open_store(), name)


@activity.defn(name=names.PLAN_TARGETS)
async def plan_targets(inp: contracts.PlanTargetsInput) -> contracts.TargetPlan:
    """A by-reference campaign's search order, stored (``proposer/plan.py``)."""
    from kernelopt.proposer.plan import plan_targets as plan_impl

    return await in_thread(plan_impl, inp, open_store())


@activity.defn(name=names.TARGET_SCOPE)
async def target_scope(inp: contracts.TargetScopeInput) -> contracts.TargetScope:
    """One planned target, its part of the segmentation and its prompt facts.

    Asked ``by_reference``, the scope is stored and only its reference and the
    bounded facts come back: the whole forward's scope is the whole model.
    """
    from kernelopt.agents.facts import build_facts, with_context
    from kernelopt.compile.segment_scope import scope_segment
    from kernelopt.compile.segment_store import store_scope
    from kernelopt.compile.triage_store import load_triage, planned_target_whole

    def run() -> contracts.TargetScope:
        store = open_store()
        target, whole = planned_target_whole(inp, store)
        segment = scope_segment(whole, target)
        try:
            triage = load_triage(inp.triage, store)
            facts = build_facts(inp.compiled, segment, target, triage, gates=inp.gates)
            facts = with_context(facts, inp.compiled, whole, target, triage)
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            # an aid to the agents: the target is searched without them
            log.warning("no prompt facts", target=target.id, error=str(exc))
            facts = None
        if not inp.by_reference:
            return contracts.TargetScope(target=target, segment=segment, facts=facts)
        ref = store_scope(target, segment, facts, store)
        bounded = facts.bounded() if facts is not None else None
        return contracts.TargetScope(target=target, facts=bounded, scope=ref)

    return await in_thread_final(run)


@activity.defn(name=names.PLAN_LOOKUP)
async def plan_lookup(inp: contracts.PlanLookupInput) -> contracts.TargetList:
    """Planned targets by id: the winners a campaign re-stitches."""
    from kernelopt.compile.triage_store import plan_lookup as lookup_impl

    return await in_thread(lookup_impl, inp, open_store())


@activity.defn(name=names.RESTITCH)
async def restitch(inp: contracts.RestitchInput) -> contracts.RestitchResult:
    """Put replacements back into the wrapper, run it on the captured args, compare."""
    return await run_supervised(
        "kernelopt.compile.restitch:restitch", inp, contracts.RestitchResult, lease="shared"
    )


GPU_ACTIVITIES = [compile_problem, triage, triage_to_store, restitch]
CPU_ACTIVITIES = [
    segment,
    segment_to_store,
    scope_segment,
    segment_targets,
    plan_targets,
    target_scope,
    plan_lookup,
]
