"""Issue 29 point 5: a whole-model target's profile is of its dominant kernel by measured time."""

from __future__ import annotations

import json
from pathlib import Path

from kernelopt.agents.facts import build_facts, stand_in_hardware
from kernelopt.contracts.compiled import (
    CompileResult,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TriageResult,
)
from kernelopt.contracts.search import (
    Analysis,
    Bottleneck,
    KernelProfile,
    ProfileResult,
)
from kernelopt.profiling.dominant import dominant_kernel, profiled_kernel
from kernelopt.profiling.harness_files import candidate_harnesses
from kernelopt.store import open_store
from tests.support import dominant as block

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wrappers"


def test_the_kernel_with_the_most_time_wins_ties_keep_program_order():
    assert dominant_kernel(["a", "b", "c"], {"a": 0.1, "b": 0.5, "c": 0.2})[0] == "b"
    assert dominant_kernel(["a", "b"], {"a": 0.3, "b": 0.3})[0] == "a"
    name, why = dominant_kernel(["a", "b"], {})
    assert name == "" and "no per-kernel times" in why


def test_forward_targets_profile_the_dominant_kernel_not_the_first():
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD, kernels=["first", "big"])
    name, why = profiled_kernel(target, {"first": 0.01, "big": 0.09})
    assert name == "big" and "90%" in why
    assert profiled_kernel(target, {})[0] == "first"  # nothing measured: as before
    kernel = SearchTarget(id="k", kind=TargetKind.KERNEL, kernels=["k"])
    assert profiled_kernel(kernel, {"k": 1.0, "other": 9.0})[0] == "k"


def test_facts_of_a_multi_kernel_forward_name_the_dominant_kernel():
    stem = FIXTURES / "level3_002_transformer_block"
    compiled = CompileResult.model_validate_json(Path(f"{stem}.compile.json").read_text())
    segment = SegmentResult.model_validate_json(Path(f"{stem}.segment.json").read_text())
    triage = TriageResult.model_validate_json(Path(f"{stem}.triage.json").read_text())
    forward = SearchTarget(
        id="forward", kind=TargetKind.FORWARD, kernels=[k.name for k in segment.kernels]
    )
    facts = build_facts(compiled, segment, forward, triage)
    times = {
        k["name"]: k["ms"]
        for k in json.loads(Path(f"{stem}.triage.json").read_text())["per_kernel"]
    }
    slowest = max((times[k], k) for k in forward.kernels if k in times)[1]
    assert facts.dominant_kernel == slowest == profiled_kernel(forward, times)[0]
    assert facts.inductor_kernels[0].name == slowest


def test_the_forced_forward_of_a_real_model_captures_and_prompts_its_dominant_kernel(tmp_path):
    """The CPU half of tests/e2e/test_gpu_profile.py, on the committed triage: the whole-model
    target a single-mode campaign makes of the transformer block gets kernel times keyed
    by its own kernels, its captured harness launches the dominant one (not the first)
    from the root's captured kernel objects, and the executor's prompt marks it."""
    store = open_store(tmp_path / "artifacts")
    compiled = block.stored(store)
    seg, forward = block.forward_target(compiled, store)
    facts, times = block.facts_and_times(compiled, seg, forward, block.recorded_triage())
    assert set(times) == set(forward.kernels)  # every kernel measured, under its own name
    dominant, why = dominant_kernel(forward.kernels, times)
    assert dominant != forward.kernels[0] and dominant == facts.dominant_kernel
    inp = block.root_profile_input(compiled, seg, forward, times)
    found, _ = candidate_harnesses(inp, store, tmp_path / "harness")
    assert found[0][1] == "captured"
    captured = found[0][0].read_text()
    assert f"KERNEL = {dominant!r}" in captured and "IS_ROOT = True" in captured
    profile = ProfileResult(
        profile=KernelProfile(source="events", kernel=dominant, kernel_note=why),
        analysis=Analysis(bottleneck=Bottleneck.UNKNOWN, reasoning=""),
        hardware=stand_in_hardware(compiled.gpu_name, block.wrapper()),
    )
    block.check_prompt(block.executor_text(forward, facts, profile, store), dominant, why)
