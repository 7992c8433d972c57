"""Which targets the built-in proposer searches in a module campaign (pure: contracts only).

Its families split by target: expert templates and launch-config search work on
one Inductor kernel at a time, algebraic rewrites on the whole forward (a
``ModelNew`` candidate).  So a built-in campaign searches the forward for
rewrites *and* every kernel for templates; the workflow imports this module in
its sandbox, which is why it reads contracts and nothing else.
"""

from __future__ import annotations

from kernelopt.contracts.compiled import (
    CompileResult,
    SearchTarget,
    SegmentResult,
    SegmentTargetsInput,
    SegmentTargetsResult,
    TargetKind,
)
from kernelopt.contracts.search import BuiltinProposeInput

FORWARD_ID = "forward"  # the id segmentation gives the forward target (child workflow ids)
REWRITE_DESCRIPTION = "the whole forward, for algebraic rewrites of the traced model (ModelNew)"


def rewrite_target(
    compiled: CompileResult, segment: SegmentResult, known: list[SearchTarget]
) -> SearchTarget:
    """The forward target the rewrite family searches.

    Segmentation's own forward target where it made one (single-kernel mode);
    otherwise one built here.  It covers every Triton kernel, so the model-level
    step never stitches a rewritten forward together with a kernel replacement.
    """
    found = next((t for t in known if t.kind == TargetKind.FORWARD), None)
    kernels = [k.name for k in segment.kernels]
    if found is not None and set(found.kernels) == set(kernels):
        return found
    return SearchTarget(
        id=FORWARD_ID,
        kind=TargetKind.FORWARD,
        kernels=kernels,
        source=compiled.problem.source,
        share=1.0,
        signature=compiled.forward_inputs(),
        description=REWRITE_DESCRIPTION,
    )


def builtin_targets(inp: SegmentTargetsInput, segment: SegmentResult) -> SegmentTargetsResult:
    """Every Triton kernel as its own target (program order), and the rewrite family's forward.

    ``segment`` is the one ``inp.segment`` names, loaded by the caller: the campaign
    carries only its reference, so it asks an activity for what it used to read here.
    The workflow ranks the kernel targets by triage's times and cuts them.
    """
    kernels = [
        SearchTarget(id=k.name, kind=TargetKind.KERNEL, kernels=[k.name], source=k.source)
        for k in segment.kernels
    ]
    known = [*([inp.forward] if inp.forward is not None else []), *segment.targets]
    return SegmentTargetsResult(
        kernels=kernels, forward=rewrite_target(inp.compiled, segment, known)
    )


def not_whole_forward(inp: BuiltinProposeInput, family_applies: str) -> str:
    """Why a whole-forward family cannot propose for ``inp`` ("" when it can).

    Library choices, algebraic rewrites and Inductor regeneration all rewrite the
    whole forward of a module problem; ``family_applies`` words the family and its
    verb ("algebraic rewrites apply") for the note the round records.
    """
    if inp.target.kind != TargetKind.FORWARD:
        return f"{family_applies} to whole-forward targets only"
    if not inp.compiled.problem.kind.inductor_variants:
        return f"{family_applies} to module problems only"
    return ""
