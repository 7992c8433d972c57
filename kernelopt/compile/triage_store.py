"""Triage kept in the artifact store, and what a by-reference campaign reads from it.

A ``TriageResult`` at a few hundred kernels is hundreds of KB (its targets'
signatures, the per-kernel table); carried in the campaign state it made every
continue-as-new input grow with the model.  The campaign now carries a
``TriageRef`` and a ``TargetPlan`` (the search order, stored; chosen in
``proposer/plan.py``); the CPU activities hand out one planned target at a time
with its scoped segmentation, and look up the winners for re-stitching.  Everything reads the store
only, so any worker of one ``KERNELOPT_HOME`` gives the same answers.
"""

from __future__ import annotations

from kernelopt.compile.segment_scope import scope_segment
from kernelopt.compile.segment_store import load_segment
from kernelopt.contracts import (
    PlanLookupInput,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TargetList,
    TargetPlan,
    TargetScopeInput,
    TriageRef,
    TriageResult,
)
from kernelopt.contracts.target_cutoff import select_targets
from kernelopt.errors import DeterministicError
from kernelopt.store import ArtifactStore


class PlanIndexError(DeterministicError):
    """A campaign asked for a target its plan does not have: retrying cannot help."""


def store_triage(triage: TriageResult, store: ArtifactStore, name: str = "") -> TriageRef:
    """Write ``triage`` once (content-addressed) and return its reference."""
    artifact = store.put_json(triage, name=name or "triage.json")
    return TriageRef.of(triage, artifact)


def load_triage(ref: TriageRef, store: ArtifactStore) -> TriageResult:
    """The stored triage; the store checks its digest on the way out."""
    return store.get_model(ref.artifact, TriageResult)


def rank_kernel_targets(kernels: list[SearchTarget], triage: TriageResult) -> list[SearchTarget]:
    """The built-in proposer's one-kernel targets by triage's share, cut as triage cuts."""
    times = {k.name: k.ms for k in triage.per_kernel if not k.is_library}
    total = triage.total_ms or 1.0
    ranked = [t.model_copy(update={"share": times.get(t.id, 0.0) / total}) for t in kernels]
    ranked.sort(key=lambda t: (-t.share, t.id))
    shares = {k: t.share for t in ranked for k in t.kernels}
    return select_targets(ranked, shares, 1.0).searched


def store_plan(targets: list[SearchTarget], store: ArtifactStore, name: str = "") -> TargetPlan:
    """Write a campaign's search order once and return its reference."""
    artifact = store.put_json(TargetList(targets=targets), name=name or "targets.json")
    kernel_targets = sum(t.kind != TargetKind.FORWARD for t in targets)
    return TargetPlan(artifact=artifact, count=len(targets), kernel_targets=kernel_targets)


def load_plan(plan: TargetPlan, store: ArtifactStore) -> list[SearchTarget]:
    """The planned targets, in search order."""
    return store.get_model(plan.artifact, TargetList).targets


def planned_target(
    inp: TargetScopeInput, store: ArtifactStore
) -> tuple[SearchTarget, SegmentResult]:
    """The plan's ``index``-th target and its part of the stored segmentation."""
    target, whole = planned_target_whole(inp, store)
    return target, scope_segment(whole, target)


def planned_target_whole(
    inp: TargetScopeInput, store: ArtifactStore
) -> tuple[SearchTarget, SegmentResult]:
    """The plan's ``index``-th target and the whole stored segmentation (its neighbours too)."""
    targets = load_plan(inp.plan, store)
    if inp.index >= len(targets):
        raise PlanIndexError(f"target {inp.index} asked of a plan of {len(targets)}")
    return targets[inp.index], load_segment(inp.segment, store)


def plan_lookup(inp: PlanLookupInput, store: ArtifactStore) -> TargetList:
    """The planned targets named in ``inp.ids`` (unknown ids are left out), plan order."""
    wanted = set(inp.ids)
    return TargetList(targets=[t for t in load_plan(inp.plan, store) if t.id in wanted])


__all__ = [
    "PlanIndexError",
    "load_plan",
    "load_triage",
    "plan_lookup",
    "planned_target",
    "planned_target_whole",
    "rank_kernel_targets",
    "store_plan",
    "store_triage",
]
