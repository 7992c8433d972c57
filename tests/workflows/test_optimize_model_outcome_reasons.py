"""A problem that ends without a single candidate says why, in the user's words."""

from __future__ import annotations

from kernelopt.contracts import (
    ArtifactRef,
    CampaignInput,
    CampaignOptions,
    OutcomeCategory,
    ProblemSpec,
)
from kernelopt.contracts.compiled import SearchTarget, TargetKind, TargetPlan
from kernelopt.contracts.search import ProposerConfig, ProposerKind, SearchKernelResult
from workflows.optimize_model import OptimizeModel


def _campaign(kind: ProposerKind) -> OptimizeModel:
    wf = OptimizeModel()
    wf._input = CampaignInput(
        campaign_id="c1",
        problem=ProblemSpec(name="gemm", source=ArtifactRef(sha256="0" * 64, size=3, name="p.py")),
        options=CampaignOptions(proposer=ProposerConfig(kind=kind, base_url="http://x/v1")),
    )
    return wf


def test_a_library_only_forward_names_the_builtin_proposers_limit() -> None:
    """An H200 gemm compiles to one cuBLAS call: nothing for launch-configuration search."""
    reason = _campaign(ProposerKind.BUILTIN)._nothing_tried_reason()
    assert "library calls only" in reason and "LLM proposer" in reason


def test_kernels_the_plan_left_out_are_not_called_library_calls() -> None:
    """A forward with Triton kernels too small to reach gamma: the plan searched the whole
    forward alone, and an empty search says so rather than "library calls only"."""
    wf = _campaign(ProposerKind.BUILTIN)
    short = "every Triton kernel together holds 0.8% of the model's GPU time: ..."
    artifact = ArtifactRef(sha256="1" * 64, size=3, name="targets.json")
    wf._state.plan = TargetPlan(artifact=artifact, count=1, kernels_short=short)
    reason = wf._nothing_tried_reason()
    assert reason.endswith(short) and "library calls only" not in reason
    wf._elapsed = lambda: 0.0  # type: ignore[method-assign]  # workflow.now() outside a run
    outcome = wf._outcome(wf._input, category=OutcomeCategory.FALLBACK, speedup=1.0, reason=reason)
    assert outcome.kernels_short == short  # the report's "Kernel targets:" line quotes it


def test_searches_that_proposed_nothing_give_their_own_stop_reasons() -> None:
    wf = _campaign(ProposerKind.BUILTIN)
    scan = "triton_spl_fused_cumsum_0"
    wf._state.targets = [SearchTarget(id=scan, kind=TargetKind.KERNEL, kernels=[scan])]
    stop = "built-in proposer has nothing left to try: split_scan kernels have no launch space"
    wf._state.results = [SearchKernelResult(target_id=scan, stopped_reason=stop)]
    assert wf._nothing_tried_reason() == f"no candidate: {scan}: {stop}"


def test_an_llm_campaign_with_no_target_does_not_blame_the_builtin_proposer() -> None:
    reason = _campaign(ProposerKind.LLM)._nothing_tried_reason()
    assert reason == "no candidate: no target was searched"


def test_the_uncompilable_error_is_capture_errors_name() -> None:
    """The workflow names the compiler's refusal by the type the compile child reports."""
    from kernelopt.compile.capture import CaptureError
    from workflows.optimize_model import UNCOMPILABLE_ERROR, uncompilable_reason

    assert CaptureError.__name__ == UNCOMPILABLE_ERROR
    long = "compile failed: CaptureError: " + "x" * 2000 + "\nTraceback (most recent call last):"
    reason = uncompilable_reason(long)
    assert reason.endswith("...") and "Traceback" not in reason and "CaptureError" not in reason
