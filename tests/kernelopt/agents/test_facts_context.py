"""What a kernel target's prompt adds from the compile record and the whole segmentation:
Inductor's chosen launch config, the launches around the target and the worker's versions."""

from __future__ import annotations

import pytest

from kernelopt.agents.facts import HOST_MARGIN, build_facts, config_lines, with_context
from kernelopt.cli.prompt import load, render
from kernelopt.contracts.data_movement import required_speedup
from kernelopt.store import open_store
from tests.kernelopt.agents.test_prompt_facts import KERNEL, _text

AFTER_MM = "triton_poi_fused_addmm_clone_split_transpose_view_1"  # launched after an mm
SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_5"
CHOSEN = {"kwargs": {"XBLOCK": 8, "R0_BLOCK": 256}, "num_warps": 4, "num_stages": 1}


@pytest.fixture
def problem(tmp_path):
    return load(KERNEL, open_store(tmp_path))


def _planner(problem, target_id: str) -> str:
    messages, _, _ = render(problem, "planner", target_id)
    return _text(messages)


def test_the_prompt_shows_the_config_inductor_chose_in_one_line(problem):
    problem.compiled = problem.compiled.model_copy(update={"kernel_configs": {SOFTMAX: CHOSEN}})
    text = _planner(problem, SOFTMAX)
    line = "- Inductor's chosen config: XBLOCK=8, R0_BLOCK=256, num_warps=4, num_stages=1"
    assert line + " (autotuned at compile)" in text


def test_an_unrecorded_config_is_said_to_be_unknown(problem):
    assert "kernel_configs" not in problem.compiled.model_dump(exclude_defaults=True)
    text = _planner(problem, SOFTMAX)
    assert "- Inductor's chosen config: not recorded by the compile (unknown)" in text


def test_a_template_s_decorator_config_and_listed_candidates_are_shown():
    decorator = {
        "num_warps": 8,
        "num_stages": 4,
        "configs": [{"kwargs": {"XBLOCK": x}, "num_warps": 4} for x in (64, 128)],
    }
    fixed, candidates = config_lines(None, decorator)
    assert fixed == "- Inductor's config: num_warps=8, num_stages=4 (its decorator)"
    assert (
        candidates == "- its autotune candidates: XBLOCK=64, num_warps=4; XBLOCK=128, num_warps=4"
    )


def test_a_kernel_target_names_its_producer_and_consumer(problem):
    text = _planner(problem, AFTER_MM)
    assert (
        "- producer (launched just before): `extern_kernels.mm` (library call, not timed per "
        "call; shares buf4)"
    ) in text
    consumer = next(line for line in text.splitlines() if line.startswith("- consumer"))
    assert (
        "`triton_poi_fused_addmm_clone_split_transpose_view_2` (Triton kernel, 1.84 us" in consumer
    )
    first = _planner(problem, "triton_per_fused_native_layer_norm_0")
    assert "- producer (launched just before): none (the target is at the forward's start)" in first


def test_the_versions_are_the_compile_record_s_not_this_machine_s(problem, monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "0.0.0-prompt-builder")
    text = _planner(problem, AFTER_MM)
    compiled = problem.compiled
    assert f"PyTorch {compiled.torch_version}, Triton {compiled.triton_version}" in text
    assert "prompt-builder" not in text


def test_the_workflow_s_own_facts_are_unchanged(problem):
    # build_facts runs inside the workflow: what it passes on must stay as recorded
    (target,) = [t for t in problem.segment.targets if t.id == AFTER_MM]
    facts = build_facts(problem.compiled, problem.segment, target, problem.triage)
    assert not facts.neighbours and not facts.launch_configs and facts.torch_version is None
    assert facts.required_note.endswith(">= 1.03") or "gamma 1.03" in facts.required_note
    added = with_context(facts, problem.compiled, problem.segment, target, problem.triage)
    assert "1.030" in added.required_note and len(added.neighbours) == 2


def test_a_fusion_group_gets_its_neighbours_but_no_config_line(problem):
    (group,) = [t for t in problem.segment.targets if t.kind == "fusion_group"]
    facts = build_facts(problem.compiled, problem.segment, group)  # no triage: nothing timed
    added = with_context(facts, problem.compiled, problem.segment, group)
    assert added.launch_configs == []
    assert added.neighbours == [
        "- producer (launched just before): `extern_kernels.mm` (library call, not timed per "
        "call; shares buf4)",
        "- consumer (launched just after): `extern_kernels.mm` (library call, not timed per "
        "call; shares buf13)",
    ]
    (second,) = [t for t in problem.segment.targets if t.id == AFTER_MM.replace("_1", "_2")]
    line = with_context(facts, problem.compiled, problem.segment, second).neighbours[0]
    assert line.startswith(
        f"- producer (launched just before): `{AFTER_MM}` (Triton kernel, not timed;"
    )


def test_a_host_bound_forward_sets_the_share_and_required_speedup_against_what_gate_4_times(
    problem,
):
    # this recorded compile: kernels 0.224 ms of GPU time, the wrapper called from Python
    # 0.279 ms; gate 4 judges the latter, so the target is a smaller part of it
    (target,) = [t for t in problem.segment.targets if t.id == AFTER_MM]
    plain = build_facts(problem.compiled, problem.segment, target, problem.triage)
    assert problem.compiled.wrapper_ms > plain.forward_ms * HOST_MARGIN
    added = with_context(plain, problem.compiled, problem.segment, target, problem.triage)
    assert added.dispatched_ms == problem.compiled.wrapper_ms
    assert added.share == pytest.approx(plain.baseline_ms / problem.compiled.wrapper_ms)
    assert added.share < plain.share
    assert added.required_speedup == required_speedup(added.share, added.gamma)
    text = _planner(problem, AFTER_MM)
    host_us = (problem.compiled.wrapper_ms - plain.forward_ms) * 1000
    assert f"as gate 4 times it (called from Python: {host_us:.2f} us" in text
    assert f"this target's share of the timed forward: {added.share:.1%}" in text
    assert "gate 4 times the whole forward called from Python" in text  # "faster" means


def test_a_forward_its_kernels_fill_keeps_the_gpu_time_share(problem):
    (target,) = [t for t in problem.segment.targets if t.id == AFTER_MM]
    plain = build_facts(problem.compiled, problem.segment, target, problem.triage)
    busy = problem.compiled.model_copy(update={"wrapper_ms": plain.forward_ms * 1.02})
    added = with_context(plain, busy, problem.segment, target, problem.triage)
    assert added.dispatched_ms is None and added.share == plain.share
    assert added.required_speedup == plain.required_speedup
