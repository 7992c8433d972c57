"""A built-in campaign gives the rewrite family the whole forward, besides the kernel targets.

The real OptimizeModel and SearchKernel workflows and the real CPU activities
(segmentation, the built-in proposer, reports) on the session's dev server; the
GPU activities are the doubles (``tests/support/gpu_doubles.py``), whose compile
step returns the wrapper captured on the H200 for the problem.  The problem
multiplies by ``torch.diag(a)``: the diagonal-broadcast rewrite must reach
gate_candidate as a whole-forward candidate, while the wrapper's kernel is still
searched by the kernel families -- and the campaign's history, with its new
patch marker, must replay on today's workflows.
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from activities.report_activities import expand_pages
from kernelopt.config import Settings
from kernelopt.contracts import Outcome, SearchKernelResult
from kernelopt.store import open_store
from tests.support.campaigns import running_workers, start_small_campaign
from tests.support.paths import ROOT
from tests.support.replay import replayed_markers
from tests.support.temporal import search_ids

PROBLEM = ROOT / "problems" / "level1" / "023_diag_matmul.py"
KERNEL = "triton_poi_fused_diag_embed_0"  # the H200 wrapper's one kernel (fixture)


async def test_a_builtin_campaign_proposes_a_rewrite_of_the_whole_forward(
    client: Client, temporal_settings: Settings
) -> None:
    store = open_store(temporal_settings.artifacts_dir)
    with running_workers(temporal_settings) as workers:
        handle = await start_small_campaign(client, temporal_settings, PROBLEM, workers)
        outcome: Outcome = await asyncio.wait_for(handle.result(), 300)
        searches = {}
        for child in await search_ids(client, handle.id):
            handle_of = client.get_workflow_handle(child, result_type=SearchKernelResult)
            result = await handle_of.result()
            searches[result.target_id] = result

    assert outcome.mode is not None and outcome.mode.value == "single"
    assert set(searches) == {"forward", KERNEL}, sorted(searches)
    assert searches[KERNEL].candidates_tried > 0  # the kernel families still had their turn

    forward_search = searches["forward"]
    pages = expand_pages(store, forward_search.log_pages)  # a finished search archives its log
    decisions = [*forward_search.decisions, *(d for p in pages for d in p.decisions)]
    rewrites = [d for d in decisions if d.candidate.label.startswith("rewrite:")]
    labels = {d.candidate.label for d in rewrites}
    assert "rewrite:diag-broadcast" in labels, forward_search.stopped_reason
    judged = next(d for d in rewrites if d.candidate.label == "rewrite:diag-broadcast")
    assert judged.verdicts, judged.reason  # it went through gate_candidate
    assert {d.candidate.plan.direction for d in rewrites if d.candidate.plan} == {"rewrite"}
    text = store.get_text(judged.candidate.source)
    forward = text.split("class ModelNew(Model):", 1)[1]
    assert "torch.diag" not in forward and "mul" in forward

    history = await handle.fetch_history()
    markers = await replayed_markers(history)  # raises on non-determinism
    assert any(b"builtin-rewrites-whole-forward" in m for m in markers)
    # a whole-forward win is judged and returned as its ModelNew, never re-stitched
    assert outcome.replaced == ["forward"], (outcome.category, outcome.reason)
    assert outcome.source_kind == "forward" and outcome.wrapper is not None
    assert "class ModelNew" in store.get_text(outcome.wrapper)
    assert any(b"forward-win-as-own-model" in m for m in markers)


def _fixture(stem: str):
    from kernelopt.contracts.compiled import CompileResult, SegmentResult

    base = ROOT / "tests" / "fixtures" / "wrappers"
    compiled = CompileResult.model_validate_json((base / f"{stem}.compile.json").read_text())
    segment = SegmentResult.model_validate_json((base / f"{stem}.segment.json").read_text())
    return compiled, segment


def test_a_multi_kernel_campaign_gets_a_forward_covering_every_kernel() -> None:
    """Multi-kernel mode has no forward target: one is built, so the model-level step never
    stitches a rewritten forward together with one of the kernel replacements."""
    from kernelopt.contracts.compiled import TargetKind
    from kernelopt.proposer.targets import rewrite_target

    compiled, segment = _fixture("level3_001_small_mlp")
    assert segment.mode.value == "multi"
    assert all(t.kind != TargetKind.FORWARD for t in segment.targets)
    forward = rewrite_target(compiled, segment, list(segment.targets))
    assert forward.kind == TargetKind.FORWARD and forward.id == "forward"
    assert forward.source == compiled.problem.source
    assert set(forward.kernels) == {k.name for k in segment.kernels}
    inputs = [r for r in compiled.arg_roles if r == "input"]
    assert len(forward.signature) == len(inputs) > 0  # the user's inputs, not the weights
    assert all(set(t.kernels) <= set(forward.kernels) for t in segment.targets)


def test_single_kernel_mode_keeps_segmentations_own_forward() -> None:
    from kernelopt.proposer.targets import rewrite_target

    compiled, segment = _fixture("level1_023_diag_matmul")
    (own,) = segment.targets
    assert rewrite_target(compiled, segment, [own]) is own


def test_a_library_only_forward_says_what_the_rewrites_found() -> None:
    """With only the rewrite search run, the reason still names the kernel families' limit."""
    from kernelopt.contracts import ArtifactRef, CampaignInput, CampaignOptions, ProblemSpec
    from kernelopt.contracts.compiled import SearchTarget, TargetKind
    from kernelopt.contracts.search import ProposerConfig, ProposerKind
    from workflows.optimize_model import OptimizeModel

    wf = OptimizeModel()
    wf._input = CampaignInput(
        campaign_id="c1",
        problem=ProblemSpec(name="gemm", source=ArtifactRef(sha256="0" * 64, size=3, name="p.py")),
        options=CampaignOptions(proposer=ProposerConfig(kind=ProposerKind.BUILTIN)),
    )
    wf._state.targets = [SearchTarget(id="forward", kind=TargetKind.FORWARD)]
    stop = "built-in proposer has nothing left to try: no algebraic rewrite applies"
    wf._state.results = [SearchKernelResult(target_id="forward", stopped_reason=stop)]
    reason = wf._nothing_tried_reason()
    assert "library calls only" in reason
    assert reason.endswith("; the forward's search stopped: no algebraic rewrite applies")


def test_builtin_kernel_targets_stop_where_the_tail_cannot_pay() -> None:
    """Per-kernel targets: largest share first to 90% of the Triton time, none under 0.2%."""
    from kernelopt.contracts.compiled import SearchTarget, TargetKind
    from workflows.optimize_model import _share_cutoff

    def target(name: str, share: float) -> SearchTarget:
        return SearchTarget(id=name, kind=TargetKind.KERNEL, kernels=[name], share=share)

    tail = [target(f"t{i}", 0.001) for i in range(300)]
    ranked = [target("a", 0.5), target("b", 0.3), target("c", 0.05), *tail]
    assert [t.id for t in _share_cutoff(ranked)] == ["a", "b", "c"]
    untimed = [target(f"u{i}", 0.0) for i in range(5)]
    assert _share_cutoff(untimed) == untimed  # no times: every kernel is searched
    assert [t.id for t in _share_cutoff([target("x", 0.0001)])] == ["x"]  # the first always


def test_only_a_lone_forward_win_is_judged_as_its_model_new() -> None:
    from kernelopt.contracts import ArtifactRef, Replacement
    from kernelopt.contracts.compiled import SearchTarget, TargetKind
    from workflows.optimize_model import _as_own_model

    blob = ArtifactRef(sha256="0" * 64, size=1, name="p.py")
    forward = Replacement(target=SearchTarget(id="forward", kind=TargetKind.FORWARD), source=blob)
    kernel = Replacement(
        target=SearchTarget(id="k", kind=TargetKind.KERNEL, kernels=["k"]), source=blob
    )
    assert _as_own_model([forward])
    assert not _as_own_model([kernel])
    assert not _as_own_model([kernel, forward])
