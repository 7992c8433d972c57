"""The part of a segmentation one target's search needs (pure contracts, workflow-safe).

Every activity of a kernel search (profile, propose, screen, gate) reads the
segmentation, and at a few hundred kernels the whole of it -- every kernel's
launches, arguments and Inductor metadata, every target's signature -- is
megabytes.  A search reads only its own target's kernels (launch records for the
harness and the facts, the kind for the memory tags), and re-stitching a fusion
group indexes ``fusion_groups`` by the group's number.  No search reads the
library calls, and nothing but a fusion group's re-stitch reads the groups, so a
single kernel's scope keeps neither and a group's keeps the groups only.  The
whole forward's scope is the whole model: a search gets it by reference.
"""

from __future__ import annotations

from kernelopt.contracts.compiled import SearchTarget, SegmentResult, TargetKind


def scope_segment(segment: SegmentResult, target: SearchTarget) -> SegmentResult:
    """``segment`` with only ``target``'s kernels, ``target`` as its one target, and what it reads."""
    wanted = set(target.kernels)
    update: dict[str, object] = {
        "kernels": [k for k in segment.kernels if k.name in wanted],
        "targets": [t for t in segment.targets if t.id == target.id] or [target],
    }
    if target.kind != TargetKind.FORWARD:
        update["library_calls"] = []
    if target.kind == TargetKind.KERNEL:
        update["fusion_groups"] = []
    return segment.model_copy(update=update)


__all__ = ["scope_segment"]
