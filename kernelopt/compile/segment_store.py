"""A segmentation kept in the artifact store and read back by reference.

The campaign workflow carries a ``SegmentRef`` (digest and counts) instead of the
segmentation itself, which at a few hundred kernels is megabytes; the activities
that read kernels, launches or targets load it here.  Everything below reads the
store only, so the CPU and GPU workers of one ``KERNELOPT_HOME`` give the same answers.
"""

from __future__ import annotations

from typing import TypeVar

from kernelopt.compile.segment_scope import scope_segment
from kernelopt.contracts import (
    ProfileInput,
    RestitchInput,
    ScopeRef,
    ScopeSegmentInput,
    SearchTarget,
    SegmentRef,
    SegmentResult,
    TargetScope,
    TriageInput,
)
from kernelopt.contracts.compiled import SearchStepInput
from kernelopt.contracts.search import PromptFacts
from kernelopt.errors import DeterministicError
from kernelopt.store import ArtifactStore

SearchStep = TypeVar("SearchStep", bound=SearchStepInput)


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


def store_scope(
    target: SearchTarget, segment: SegmentResult, facts: PromptFacts | None, store: ArtifactStore
) -> ScopeRef:
    """Write a target's scope (its scoped segmentation and full facts) once; return its reference."""
    artifact = store.put_json(
        TargetScope(target=target, segment=segment, facts=facts), name=f"{target.id}.scope.json"
    )
    first = next(
        (k for k in segment.kernels if target.kernels and k.name == target.kernels[0]), None
    )
    return ScopeRef(
        artifact=artifact,
        target=target.id,
        kernels=len(segment.kernels),
        library_calls=len(segment.library_calls),
        fusion_groups=len(segment.fusion_groups),
        kernel_kind=first.kind if first is not None else "",
    )


def load_scope(ref: ScopeRef, store: ArtifactStore) -> TargetScope:
    """The stored scope, its segmentation inline; the store checks its digest on the way out."""
    scope = store.get_model(ref.artifact, TargetScope)
    if scope.segment is None:
        raise SegmentMissingError(f"the stored scope of {ref.target} holds no segmentation")
    return scope


def with_scope(inp: SearchStep, store: ArtifactStore) -> SearchStep:
    """A search step's input with its scoped segmentation inline, as its library code reads it.

    A profile also gets every kernel's time back from the stored facts (the
    search's own facts list only the slowest), so the dominant kernel's share of
    the Triton time reads as it did inline.
    """
    if inp.segment is not None:
        return inp
    if inp.scope is None:
        raise SegmentMissingError(f"{type(inp).__name__} carries no segmentation and no scope")
    scope = load_scope(inp.scope, store)
    update: dict[str, object] = {"segment": scope.segment}
    if isinstance(inp, ProfileInput) and scope.facts is not None:
        times = {k.name: k.ms for k in scope.facts.inductor_kernels if k.ms}
        update["kernel_times"] = times or inp.kernel_times
    return inp.model_copy(update=update)


__all__ = [
    "SegmentMissingError",
    "load_scope",
    "load_segment",
    "scoped",
    "segment_of",
    "store_scope",
    "store_segment",
    "with_scope",
]
