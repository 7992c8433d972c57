"""Segmentation, triage and the payloads a campaign sends, at hundreds of kernels (CPU).

Large models (problems/large/) compile to a few hundred Triton kernel launches;
a synthetic wrapper of that size (tests/support/synthetic_wrapper.py) is
segmented and triaged here, and every payload a kernel search would send is
measured as Temporal's pydantic data converter encodes it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.compile import segment as segment_module
from kernelopt.compile.restitch import build_restitched
from kernelopt.compile.segment import build_segment
from kernelopt.compile.segment_scope import scope_segment
from kernelopt.compile.segment_store import store_segment
from kernelopt.compile.triage import summarize
from kernelopt.compile.wrapper_parse import _Source, parse_wrapper
from kernelopt.contracts import CampaignState
from kernelopt.contracts.compiled import (
    CompileResult,
    KernelTiming,
    Replacement,
    RestitchInput,
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.search import SearchKernelInput
from kernelopt.contracts.target_cutoff import select_targets
from kernelopt.store import ArtifactStore, open_store
from tests.support.synthetic_wrapper import kernel_name, synthetic_wrapper
from tests.support.wrappers import fixture_json, wrapper_text

KERNELS = 300
LIMIT = 256 * 1024  # as tests/workflows/test_payload_sizes.py: far below Temporal's 2 MiB


def _size(value: object) -> int:
    return pydantic_data_converter.payload_converter.to_payloads([value])[0].ByteSize()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ArtifactStore:
    return open_store(tmp_path_factory.mktemp("scale") / "artifacts")


@pytest.fixture(scope="module")
def large(store: ArtifactStore) -> SegmentResult:
    return build_segment(parse_wrapper(synthetic_wrapper(KERNELS)), store, SearchMode.MULTI)


def _timings(segment: SegmentResult) -> list[KernelTiming]:
    """A long tail, as in real models: kernel i takes 1/(i+1) of the first one's time."""
    times = [
        KernelTiming(name=k.name, ms=1.0 / (i + 1), is_library=False)
        for i, k in enumerate(segment.kernels)
    ]
    times.append(KernelTiming(name="extern_kernels.mm", ms=2.0, is_library=True))
    return times


def test_the_synthetic_wrapper_segments_like_a_large_model(large: SegmentResult) -> None:
    assert len(large.kernels) == KERNELS
    assert all(len(k.launches) == 2 for k in large.kernels)  # layers that share code
    assert len(large.library_calls) == 2 * KERNELS // 4 + 1
    assert large.fusion_groups and all(len(g.kernels) == 4 for g in large.fusion_groups)
    kinds = {t.kind for t in large.targets}
    assert kinds == {TargetKind.KERNEL, TargetKind.FUSION_GROUP}
    first = large.kernels[0].launches[1].args[0]
    assert first.tensor is not None and first.tensor.shape == [1024, 768]


def test_segmentation_indexes_the_wrapper_source_once(
    store: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing each launch's arguments used to re-index the whole wrapper: quadratic."""
    text = synthetic_wrapper(60)
    parsed = parse_wrapper(text)
    indexed: list[int] = []
    real_init = _Source.__init__

    def counting_init(self: _Source, source: str) -> None:
        indexed.append(len(source))
        real_init(self, source)

    monkeypatch.setattr(segment_module._Source, "__init__", counting_init)
    build_segment(parsed, store, SearchMode.MULTI)
    assert sum(indexed) == 0  # segmentation itself never re-reads the source


def test_segmenting_hundreds_of_kernels_takes_seconds(store: ArtifactStore) -> None:
    text = synthetic_wrapper(KERNELS)
    start = time.perf_counter()
    build_segment(parse_wrapper(text), store, SearchMode.MULTI)
    # was ~30 s at 200 kernels on a shared 2-core machine before the fix; ~1 s after
    assert time.perf_counter() - start < 15.0


def test_triage_ranks_by_share_and_states_its_cut_off(large: SegmentResult) -> None:
    result = summarize(_timings(large), large.targets, SearchMode.MULTI)
    shares = [t.share for t in result.targets]
    assert shares == sorted(shares, reverse=True)
    assert result.targets[0].share > result.targets[-1].share
    kept = len(result.targets) + len(result.deferred_targets)
    assert kept == len(large.targets)  # nothing dropped silently: deferred ids are listed
    assert 0 < len(result.targets) < len(large.targets)
    assert "cover 90% of the Triton time" in result.cutoff
    assert f"of {len(large.targets)} targets searched" in result.cutoff
    smallest_kept = min(t.share for t in result.targets)
    by_id = {t.id: t.share for t in large.targets}
    deferred_kernels = [i for i in result.deferred_targets if not i.startswith("group")]
    assert deferred_kernels  # the long tail waits
    ms = {t.name: t.ms for t in _timings(large) if not t.is_library}
    searched_kernels = {k for t in result.targets if t.kind == TargetKind.KERNEL for k in t.kernels}
    left = set(ms) - searched_kernels
    assert result.deferred_share == pytest.approx(sum(ms[k] for k in left) / result.total_ms)
    assert f"{len(left)} other kernels" in result.cutoff
    # every target below the cut ranks at or below the smallest one kept
    full = summarize(_timings(large), large.targets, SearchMode.MULTI, coverage=1.0, min_share=0)
    shares_by_id = {t.id: t.share for t in full.targets}
    assert all(shares_by_id[i] <= smallest_kept for i in result.deferred_targets)
    assert set(by_id) == set(shares_by_id)


def _target(tid: str, share: float, kernels: list[str], kind=TargetKind.KERNEL) -> SearchTarget:
    return SearchTarget(id=tid, kind=kind, kernels=kernels, share=share)


def test_cut_off_rules() -> None:
    ms = {"a": 5.0, "b": 3.0, "c": 1.0, "d": 0.5, "e": 0.5}
    total = 20.0  # 10 ms of library time besides
    ranked = [_target(k, v / total, [k]) for k, v in ms.items()]
    # coverage: a + b = 80% of the Triton time, a + b + c = 90%: stop there
    cut = select_targets(ranked, ms, total, coverage=0.9, min_share=0.0)
    assert [t.id for t in cut.searched] == ["a", "b", "c"]
    assert [t.id for t in cut.deferred] == ["d", "e"]
    assert cut.deferred_share == pytest.approx(1.0 / total)
    # min_share: nothing under 10% of the model's time, but the first target always
    cut = select_targets(ranked, ms, total, coverage=1.0, min_share=0.1)
    assert [t.id for t in cut.searched] == ["a", "b"]
    cut = select_targets(ranked, ms, total, coverage=1.0, min_share=0.9)
    assert [t.id for t in cut.searched] == ["a"]
    # a fusion group above the cut rides along but does not count towards the coverage
    group = _target("group0", 8.0 / total, ["a", "b"], TargetKind.FUSION_GROUP)
    cut = select_targets([group, *ranked], ms, total, coverage=0.8, min_share=0.0)
    assert [t.id for t in cut.searched] == ["group0", "a", "b"]
    # nothing measured: no basis for a cut, everything is searched
    cut = select_targets(ranked, dict.fromkeys(ms, 0.0), 0.0)
    assert len(cut.searched) == len(ranked) and "no Triton time" in cut.rule


def test_a_scoped_segment_keeps_a_search_payload_small(large: SegmentResult) -> None:
    compiled = CompileResult.model_validate(fixture_json("level3_002_transformer_block", "compile"))
    full = _size(large)
    kernel = next(t for t in large.targets if t.kind == TargetKind.KERNEL)
    group = next(t for t in large.targets if t.kind == TargetKind.FUSION_GROUP)
    for target in (kernel, group):
        scoped = scope_segment(large, target)
        assert {k.name for k in scoped.kernels} == set(target.kernels)
        assert scoped.targets == [target]
        # re-stitching a group indexes them; nothing of a single kernel's search reads them
        groups = large.fusion_groups if target.kind == TargetKind.FUSION_GROUP else []
        assert scoped.fusion_groups == groups and scoped.library_calls == []
        child = SearchKernelInput(
            campaign_id="c",
            compiled=compiled,
            segment=scoped,
            target=target,
            gpu_queue="gpu",
            cpu_queue="cpu",
        )
        assert _size(child) < LIMIT, (target.id, _size(child))
    # what every activity of a search carried before: the whole segmentation
    assert full > 4 * LIMIT


def test_triage_and_campaign_state_at_scale_stay_under_temporal_limits(
    large: SegmentResult, store: ArtifactStore
) -> None:
    """The campaign state carries the segmentation by reference (test_segment_by_reference.py).

    What still grows with the model is triage's result and the searched targets (their
    signatures), which the state holds twice; pinned under Temporal's 512 KiB warning
    so growth is seen.
    """
    result = summarize(_timings(large), large.targets, SearchMode.MULTI)
    assert _size(result) < 2 * LIMIT  # Temporal warns from 512 KiB
    compiled = CompileResult.model_validate(fixture_json("level3_002_transformer_block", "compile"))
    ref = store_segment(large, store)
    state = CampaignState(compiled=compiled, segment_ref=ref, triage=result, targets=result.targets)
    assert _size(state) < 2 * LIMIT


def test_a_scoped_segment_restitches_like_the_whole_one(tmp_path: Path) -> None:
    """Gate 1 re-stitches a fusion-group candidate from the search's segment."""
    name = "level2_004_conv_affine_relu"
    store = open_store(tmp_path / "artifacts")
    recorded = CompileResult.model_validate(fixture_json(name, "compile"))
    ref = store.put_text(wrapper_text(name), media_type="text/x-python", name=f"{name}_wrapper.py")
    compiled = recorded.model_copy(update={"wrapper": ref})
    segment = build_segment(parse_wrapper(wrapper_text(name)), store, SearchMode.MULTI)
    group = next(t for t in segment.targets if t.kind == TargetKind.FUSION_GROUP)
    source = store.put_text(
        "import torch\n\ndef launch(*args):\n    pass\n", media_type="text/x-python", name="c.py"
    )
    texts = []
    for seg in (segment, scope_segment(segment, group)):
        inp = RestitchInput(
            compiled=compiled,
            segment=seg,
            replacements=[Replacement(target=group, source=source)],
            run=False,
        )
        texts.append(build_restitched(inp, store)[0])
    assert texts[0] == texts[1]


def test_kernel_names_follow_inductor() -> None:
    assert kernel_name(7) == "triton_poi_fused_add_relu_7"
