"""A segmentation kept in the artifact store and read back by reference.

The campaign workflow carries a ``SegmentRef`` (digest and counts) instead of the
segmentation itself, which at a few hundred kernels is megabytes; the activities
that read kernels, launches or targets load it here.  Everything below reads the
store only, so the CPU and GPU workers of one ``KERNELOPT_HOME`` give the same answers.
"""

from __future__ import annotations

from kernelopt.compile.segment_scope import scope_segment
from kernelopt.contracts.compiled import (
    RestitchInput,
    ScopeSegmentInput,
    SegmentRef,
    SegmentResult,
    TriageInput,
)
from kernelopt.errors import DeterministicError
from kernelopt.store import ArtifactStore


class SegmentMissingError(DeterministicError):
    """An input names neither a segmentation nor a stored one: retrying cannot help."""


def store_segment(segment: SegmentResult, store: ArtifactStore, name: str = "") -> SegmentRef:
    """Write ``segment`` once (content-addressed: the same segmentation, the same digest)."""
    artifact = store.put_json(segment, name=name or "segment.json")
    return SegmentRef.of(segment, artifact)


def load_segment(ref: SegmentRef, store: ArtifactStore) -> SegmentResult:
    """The stored segmentation; the store checks its digest on the way out."""
    return store.get_model(ref.artifact, SegmentResult)


def segment_of(inp: TriageInput | RestitchInput, store: ArtifactStore) -> SegmentResult:
    """The input's segmentation: carried inline (older campaigns) or loaded by reference."""
    if inp.segment is not None:
        return inp.segment
    if inp.segment_ref is not None:
        return load_segment(inp.segment_ref, store)
    raise SegmentMissingError(f"{type(inp).__name__} carries no segmentation and no reference")


def scoped(inp: ScopeSegmentInput, store: ArtifactStore) -> SegmentResult:
    """What a kernel search gets: its target's part of the stored segmentation."""
    return scope_segment(load_segment(inp.segment, store), inp.target)


__all__ = [
    "SegmentMissingError",
    "load_segment",
    "scoped",
    "segment_of",
    "store_segment",
]
