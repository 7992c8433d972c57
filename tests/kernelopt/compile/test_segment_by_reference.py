"""The campaign carries its segmentation by reference (patch ``segmentation-by-reference``).

At a few hundred kernels the segmentation is megabytes; it used to sit in the
campaign state, so every continue-as-new input, the triage and re-stitch inputs
and the workflow's history grew with the model.  Now it is written once to the
artifact store and a ``SegmentRef`` travels.  Sizes are measured as Temporal's
pydantic data converter encodes them, on the synthetic wrapper of
tests/support/synthetic_wrapper.py; the last test runs a real campaign (real
workflows and CPU activities, GPU doubles) and replays its history.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities import compile_activities as acts
from kernelopt.agents.facts import build_facts
from kernelopt.compile.segment import build_segment
from kernelopt.compile.segment_scope import scope_segment
from kernelopt.compile.segment_store import (
    SegmentMissingError,
    load_scope,
    load_segment,
    segment_of,
    store_segment,
)
from kernelopt.compile.triage import summarize
from kernelopt.compile.triage_store import load_plan, load_triage
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.config import Settings
from kernelopt.contracts import (
    CampaignState,
    CompileResult,
    KernelTiming,
    Outcome,
    Replacement,
    RestitchInput,
    ScopeSegmentInput,
    SearchKernelInput,
    SearchMode,
    SegmentInput,
    SegmentResult,
    SegmentTargetsInput,
    TargetKind,
    TargetScope,
    TriageInput,
    TriageResult,
    names,
)
from kernelopt.proposer.targets import rewrite_target
from kernelopt.store import ArtifactStore, open_store
from tests.support.by_reference import KIB, LARGE, SMALL, payload_size
from tests.support.campaigns import running_workers, start_small_campaign
from tests.support.paths import ROOT
from tests.support.replay import replayed_markers
from tests.support.synthetic_wrapper import synthetic_wrapper
from tests.support.wrappers import fixture_json, wrapper_text


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ArtifactStore:
    return open_store(tmp_path_factory.mktemp("segref") / "artifacts")


@pytest.fixture(scope="module")
def compiled() -> CompileResult:
    return CompileResult.model_validate(fixture_json("level3_002_transformer_block", "compile"))


@pytest.fixture(scope="module")
def segments(store: ArtifactStore) -> dict[int, SegmentResult]:
    return {
        n: build_segment(parse_wrapper(synthetic_wrapper(n)), store, SearchMode.MULTI)
        for n in (SMALL, LARGE)
    }


def _triage(segment: SegmentResult) -> TriageResult:
    times = [
        KernelTiming(name=k.name, ms=1.0 / (i + 1), is_library=False)
        for i, k in enumerate(segment.kernels)
    ]
    times.append(KernelTiming(name="extern_kernels.mm", ms=2.0, is_library=True))
    return summarize(times, segment.targets, segment.mode)


def test_the_campaign_state_no_longer_grows_with_the_segmentation(
    segments: dict[int, SegmentResult], store: ArtifactStore, compiled: CompileResult
) -> None:
    """The state after the segment step: inline it grew with the kernels, by reference not."""
    inline = {
        n: payload_size(CampaignState(compiled=compiled, segment=s)) for n, s in segments.items()
    }
    by_ref = {
        n: payload_size(CampaignState(compiled=compiled, segment_ref=store_segment(s, store)))
        for n, s in segments.items()
    }
    assert inline[LARGE] > 1024 * KIB  # what continue-as-new carried at 300 kernels
    assert inline[LARGE] > 20 * inline[SMALL]
    assert abs(by_ref[LARGE] - by_ref[SMALL]) < 2 * KIB, by_ref
    assert by_ref[LARGE] < 8 * KIB, by_ref


def test_triage_and_restitch_inputs_carry_the_reference(
    segments: dict[int, SegmentResult], store: ArtifactStore, compiled: CompileResult
) -> None:
    sizes: dict[str, dict[int, int]] = {"triage": {}, "restitch": {}, "scope": {}}
    for n, segment in segments.items():
        ref = store_segment(segment, store)
        target = segment.targets[0]
        replacement = Replacement(target=target, source=compiled.wrapper)
        sizes["triage"][n] = payload_size(TriageInput(compiled=compiled, segment_ref=ref))
        sizes["restitch"][n] = payload_size(
            RestitchInput(compiled=compiled, segment_ref=ref, replacements=[replacement])
        )
        sizes["scope"][n] = payload_size(ScopeSegmentInput(segment=ref, target=target))
        # inline, the whole segmentation rode along: megabytes at 300 kernels
        assert payload_size(TriageInput(compiled=compiled, segment=segment)) > payload_size(segment)
    for name, by_n in sizes.items():
        assert abs(by_n[LARGE] - by_n[SMALL]) < 2 * KIB, (name, by_n)


def test_a_stored_segmentation_reads_back_equal(
    segments: dict[int, SegmentResult], store: ArtifactStore
) -> None:
    segment = segments[LARGE]
    ref = store_segment(segment, store)
    assert load_segment(ref, store) == segment
    assert store_segment(segment, store).artifact == ref.artifact  # content-addressed
    counts = (ref.kernels, ref.library_calls, ref.fusion_groups, ref.targets)
    expected = (
        len(segment.kernels),
        len(segment.library_calls),
        len(segment.fusion_groups),
        len(segment.targets),
    )
    assert counts == expected
    assert (ref.mode, ref.mode_reason) == (segment.mode, segment.mode_reason)


def test_segment_of_prefers_the_inline_segmentation_and_loads_a_reference(
    segments: dict[int, SegmentResult], store: ArtifactStore, compiled: CompileResult
) -> None:
    small, large = segments[SMALL], segments[LARGE]
    ref = store_segment(large, store)
    assert segment_of(TriageInput(compiled=compiled, segment_ref=ref), store) == large
    both = TriageInput(compiled=compiled, segment=small, segment_ref=ref)
    assert segment_of(both, store) == small  # an older campaign's inline one wins
    with pytest.raises(SegmentMissingError):
        segment_of(RestitchInput(compiled=compiled), store)


def test_facts_from_a_scoped_segment_equal_those_from_the_whole(
    segments: dict[int, SegmentResult], compiled: CompileResult
) -> None:
    """The by-reference campaign builds prompt facts from the target's part only."""
    segment = segments[SMALL]
    triage = _triage(segment)
    forward = rewrite_target(compiled, segment, list(segment.targets))
    kinds = {TargetKind.KERNEL, TargetKind.FUSION_GROUP}
    targets = [next(t for t in triage.targets if t.kind == kind) for kind in kinds]
    for target in [*targets, forward]:
        whole = build_facts(compiled, segment, target, triage)
        assert build_facts(compiled, scope_segment(segment, target), target, triage) == whole
        assert whole.launches or target.kind == TargetKind.FORWARD


async def test_the_activities_store_scope_and_list_targets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store()
    name = "level3_001_small_mlp"
    recorded = CompileResult.model_validate(fixture_json(name, "compile"))
    compiled = recorded.model_copy(update={"wrapper": store.put_text(wrapper_text(name))})
    env = ActivityEnvironment()
    inline = await env.run(acts.segment, SegmentInput(compiled=compiled))
    ref = await env.run(acts.segment_to_store, SegmentInput(compiled=compiled))
    assert load_segment(ref, store) == inline

    for target in inline.targets:
        scoped = await env.run(acts.scope_segment, ScopeSegmentInput(segment=ref, target=target))
        assert scoped == scope_segment(inline, target)

    listed = await env.run(
        acts.segment_targets, SegmentTargetsInput(compiled=compiled, segment=ref)
    )
    assert [(t.id, t.kernels, t.source) for t in listed.kernels] == [
        (k.name, [k.name], k.source) for k in inline.kernels
    ]
    assert listed.forward == rewrite_target(compiled, inline, list(inline.targets))
    # triage's own forward target comes first, as in the workflow's ``known`` list
    own = listed.forward.model_copy(update={"share": 1.0, "description": "triage's"})
    again = SegmentTargetsInput(compiled=compiled, segment=ref, forward=own)
    assert (await env.run(acts.segment_targets, again)).forward == own


async def test_a_campaign_carries_the_reference_and_replays(
    client: Client, temporal_settings: Settings
) -> None:
    store = open_store(temporal_settings.artifacts_dir)
    problem = ROOT / "problems" / "level3" / "001_small_mlp.py"
    with running_workers(temporal_settings) as workers:
        handle = await start_small_campaign(client, temporal_settings, problem, workers)
        outcome: Outcome = await asyncio.wait_for(handle.result(), 300)
        state = await handle.query("state", result_type=CampaignState)

    assert state.segment is None and state.segment_ref is not None
    segment = load_segment(state.segment_ref, store)  # in the store, which state export moves
    assert state.segment_ref.kernels == len(segment.kernels) > 0
    assert outcome.mode == segment.mode and outcome.mode_reason == segment.mode_reason
    # triage too: the state and the outcome carry its reference, the plan holds the targets
    assert state.triage is None and state.triage_ref is not None and not state.targets
    triage = load_triage(state.triage_ref, store)
    assert state.triage_ref.searched == len(triage.targets) > 0
    assert outcome.triage is None and outcome.triage_ref == state.triage_ref
    planned = load_plan(state.plan, store)
    assert [r.target_id for r in state.results] == [t.id for t in planned][: len(state.results)]
    assert outcome.report is not None
    assert "## Triage" in store.get_text(outcome.report)  # the report loaded it by reference

    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    kinds = [a.activity_type.name for a in scheduled]
    assert names.SEGMENT_TO_STORE in kinds and names.SEGMENT not in kinds
    # since "triage-by-reference" one activity scopes each target and builds its facts
    assert kinds.count(names.TARGET_SCOPE) == len(state.results) > 0
    triaged = next(a for a in scheduled if a.activity_type.name == names.TRIAGE_TO_STORE)
    payload = triaged.input.payloads[0].data
    assert state.segment_ref.artifact.sha256.encode() in payload
    assert b'"kernels":[' not in payload  # no segmentation inline
    completed = [
        e.activity_task_completed_event_attributes.result.payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    triage_result = next(p for p in completed if state.triage_ref.artifact.sha256.encode() in p)
    assert b'"per_kernel"' not in triage_result and b'"signature"' not in triage_result
    # since "scope-by-reference" no target's scoped segmentation travels: target_scope
    # stores it, the searches and their activities carry its reference
    scope_ids = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.TARGET_SCOPE
    }
    scopes = [
        TargetScope.model_validate_json(
            e.activity_task_completed_event_attributes.result.payloads[0].data
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and e.activity_task_completed_event_attributes.scheduled_event_id in scope_ids
    ]
    assert len(scopes) == len(state.results)
    assert all(s.segment is None and s.scope is not None for s in scopes)
    assert all(load_scope(s.scope, store).segment is not None for s in scopes)
    searches = [
        SearchKernelInput.model_validate_json(
            e.start_child_workflow_execution_initiated_event_attributes.input.payloads[0].data
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        and e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
        == names.SEARCH_KERNEL
    ]
    assert [(c.segment, c.scope) for c in searches] == [(None, s.scope) for s in scopes]

    markers = await replayed_markers(history)  # raises on non-determinism
    assert any(b"segmentation-by-reference" in m for m in markers)
    assert any(b"triage-by-reference" in m for m in markers)
    assert any(b"scope-by-reference" in m for m in markers)
