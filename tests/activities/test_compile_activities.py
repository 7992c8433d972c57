"""Activity definitions: names, queues, and the in-process segment activity."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import compile_activities as acts
from kernelopt.contracts import CompileInput, CompileResult, SegmentInput, names
from kernelopt.store import open_store
from tests.support.wrappers import fixture_json, wrapper_text


def test_activity_names_and_queues() -> None:
    def name_of(fn) -> str:
        return fn.__temporal_activity_definition.name

    assert {name_of(f) for f in acts.GPU_ACTIVITIES} == {
        names.COMPILE,
        names.TRIAGE,
        names.TRIAGE_TO_STORE,
        names.RESTITCH,
    }
    assert {name_of(f) for f in acts.CPU_ACTIVITIES} == {
        names.SEGMENT,
        names.SEGMENT_TO_STORE,
        names.SCOPE_SEGMENT,
        names.SEGMENT_TARGETS,
        names.PLAN_TARGETS,
        names.TARGET_SCOPE,
        names.PLAN_LOOKUP,
    }
    assert set(map(name_of, acts.CPU_ACTIVITIES)) <= set(names.CPU_ACTIVITIES)
    assert set(map(name_of, acts.GPU_ACTIVITIES)) <= set(names.GPU_ACTIVITIES)


async def test_segment_activity_runs_in_process(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store()
    name = "level3_001_small_mlp"
    recorded = CompileResult.model_validate(fixture_json(name, "compile"))
    compiled = recorded.model_copy(update={"wrapper": store.put_text(wrapper_text(name))})
    result = await ActivityEnvironment().run(acts.segment, SegmentInput(compiled=compiled))
    assert result.mode.value == "multi"
    assert len(result.library_calls) == 4


async def test_segment_activity_reports_junk_as_non_retryable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store()
    recorded = CompileResult.model_validate(fixture_json("level3_001_small_mlp", "compile"))
    compiled = recorded.model_copy(update={"wrapper": store.put_text("x = 1\n")})
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.segment, SegmentInput(compiled=compiled))
    assert info.value.non_retryable


async def test_the_baseline_compile_has_the_gpu_to_itself(tmp_path: Path, monkeypatch) -> None:
    """max-autotune times its choices and caches them: a compile beside a shared section
    (another slot's gates) would keep a slowed baseline for every later measurement."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    leases: list[str | None] = []

    async def supervised(target, inp, result_type, **kwargs):
        leases.append(kwargs.get("lease"))
        raise ApplicationError("recorded", non_retryable=True)

    monkeypatch.setattr(acts, "run_supervised", supervised)
    recorded = CompileResult.model_validate(fixture_json("level3_001_small_mlp", "compile"))
    with pytest.raises(ApplicationError, match="recorded"):
        await ActivityEnvironment().run(
            acts.compile_problem, CompileInput(problem=recorded.problem)
        )
    assert leases == ["exclusive"]
