"""The part of a segmentation one target's search needs (pure contracts, workflow-safe).

Every activity of a kernel search (profile, propose, gate, re-time) carries the
segmentation, and at a few hundred kernels the whole of it -- every kernel's
launches, arguments and Inductor metadata, every target's signature -- is
megabytes per call: thousands of candidates would push the search's history
past Temporal's limits.  A search only reads its own target's kernels; the
fusion groups and library calls stay whole because re-stitching a group
indexes ``fusion_groups`` by the group's number, and both are small.
"""

from __future__ import annotations

from kernelopt.contracts.compiled import SearchTarget, SegmentResult


def scope_segment(segment: SegmentResult, target: SearchTarget) -> SegmentResult:
    """``segment`` with only ``target``'s kernels and ``target`` as its one target."""
    wanted = set(target.kernels)
    return segment.model_copy(
        update={
            "kernels": [k for k in segment.kernels if k.name in wanted],
            "targets": [t for t in segment.targets if t.id == target.id] or [target],
        }
    )


__all__ = ["scope_segment"]
