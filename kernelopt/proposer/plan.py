"""A by-reference campaign's search order: triage's targets as the proposer narrows them.

The same steps, in the same order, as the campaign workflow's inline
``_choose_targets`` of campaigns from before "triage-by-reference"; here they read
the stored triage and segmentation, and the chosen list goes back to the store.
One step is this path's alone: beside the whole forward, the built-in proposer
searches no single kernel when all of them together could not reach gamma.
"""

from __future__ import annotations

import structlog

from kernelopt.compile.segment_store import load_segment
from kernelopt.compile.triage_store import load_triage, rank_kernel_targets, store_plan
from kernelopt.contracts import (
    PlanTargetsInput,
    SegmentTargetsInput,
    SegmentTargetsResult,
    TargetKind,
    TargetPlan,
)
from kernelopt.contracts.target_cutoff import kernels_short_of_gamma
from kernelopt.proposer.targets import builtin_targets
from kernelopt.store import ArtifactStore

log = structlog.get_logger(__name__)


def plan_targets(inp: PlanTargetsInput, store: ArtifactStore) -> TargetPlan:
    """Store the campaign's targets in search order; the campaign carries how many."""
    triage = load_triage(inp.triage, store)
    targets = list(triage.targets)
    forward = next((t for t in targets if t.kind == TargetKind.FORWARD), None)
    listed: SegmentTargetsResult | None = None

    def builtin() -> SegmentTargetsResult:
        segment = load_segment(inp.segment, store)
        known = SegmentTargetsInput(compiled=inp.compiled, segment=inp.segment, forward=forward)
        return builtin_targets(known, segment)

    if inp.builtin_kernels and forward is not None:
        listed = builtin()
        targets = rank_kernel_targets(listed.kernels, triage)
    if inp.skip_fusion_groups:
        # fusing kernels takes new code; the built-in proposer only re-tunes one kernel
        targets = [t for t in targets if t.kind != TargetKind.FUSION_GROUP]
    if inp.max_targets is not None:
        targets = targets[: inp.max_targets]
    short = ""
    if inp.rewrites_first:
        # first: a rewrite's wins are the largest and its search the cheapest
        forward_target = (listed or builtin()).forward
        targets = [forward_target, *(t for t in targets if t.kind != TargetKind.FORWARD)]
        short = kernels_short_of_gamma(triage.triton_ms, triage.total_ms, triage.gamma)
        if short:  # the kernels' searches could not change the outcome
            log.info("kernel_targets_dropped", reason=short, dropped=len(targets) - 1)
            targets = targets[:1]
    plan = store_plan(targets, store, f"{inp.compiled.problem.name}.targets.json")
    return plan.model_copy(update={"kernels_short": short})


__all__ = ["plan_targets"]
