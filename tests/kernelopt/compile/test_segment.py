"""Segmentation and mode selection on the captured wrappers (CPU, pure text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.compile.segment import build_segment, segment
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts.compiled import (
    CompileResult,
    SearchMode,
    SegmentInput,
    SegmentResult,
    TargetKind,
)
from kernelopt.store import ArtifactStore, open_store
from tests.support.wrappers import DATA, fixture_json, fixture_names, wrapper_text

NAMES = fixture_names()


@pytest.fixture
def tmp_store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


def _compiled(name: str, store: ArtifactStore) -> CompileResult:
    """The recorded CompileResult with its wrapper (and problem source) put into ``store``."""
    recorded = CompileResult.model_validate(fixture_json(name, "compile"))
    ref = store.put_text(wrapper_text(name), media_type="text/x-python", name=f"{name}_wrapper.py")
    assert ref.sha256 == recorded.wrapper.sha256
    return recorded.model_copy(update={"wrapper": ref})


@pytest.mark.parametrize("name", NAMES)
def test_resegmenting_on_cpu_reproduces_the_gpu_segmentation(
    name: str, tmp_store: ArtifactStore
) -> None:
    got = segment(SegmentInput(compiled=_compiled(name, tmp_store)), tmp_store)
    want = SegmentResult.model_validate(fixture_json(name, "segment"))
    assert got == want


@pytest.mark.parametrize("name", NAMES)
def test_library_calls_are_frozen_and_never_targets(name: str, tmp_store: ArtifactStore) -> None:
    result = segment(
        SegmentInput(compiled=_compiled(name, tmp_store), mode=SearchMode.MULTI), tmp_store
    )
    kernel_names = {k.name for k in result.kernels}
    for call in result.library_calls:
        assert call.needs_triton_replacement is False
        assert call.name not in kernel_names
    for target in result.targets:
        assert set(target.kernels) <= kernel_names
        assert target.kind in (TargetKind.KERNEL, TargetKind.FUSION_GROUP)
        assert target.source is not None and tmp_store.exists(target.source)
    kernel_targets = [t for t in result.targets if t.kind == TargetKind.KERNEL]
    assert len(kernel_targets) == len(result.kernels)


@pytest.mark.parametrize(
    ("name", "mode", "why"),
    [
        ("level1_001_relu_chain", SearchMode.SINGLE, "one operator"),
        ("level1_011_layernorm", SearchMode.SINGLE, "one operator"),
        ("level1_023_diag_matmul", SearchMode.SINGLE, "operands are prepared"),
        ("level1_024_tril_matmul", SearchMode.SINGLE, "operands are prepared"),
        ("level2_001_gemm_bias_relu", SearchMode.MULTI, "library calls frozen"),
        ("level2_004_conv_affine_relu", SearchMode.MULTI, "library calls frozen"),
        ("level3_001_small_mlp", SearchMode.MULTI, "library calls frozen"),
        ("level3_002_transformer_block", SearchMode.MULTI, "library calls frozen"),
    ],
)
def test_auto_mode_follows_the_compiled_graph(
    name: str, mode: SearchMode, why: str, tmp_store: ArtifactStore
) -> None:
    result = build_segment(parse_wrapper(wrapper_text(name)), tmp_store)
    assert result.mode == mode
    assert why in result.mode_reason
    assert result.mode_forced is False


def test_single_mode_has_one_forward_target_with_the_module_inputs(
    tmp_store: ArtifactStore,
) -> None:
    compiled = _compiled("level1_023_diag_matmul", tmp_store)
    result = segment(SegmentInput(compiled=compiled), tmp_store)
    (target,) = result.targets
    assert target.kind == TargetKind.FORWARD and target.id == "forward"
    assert target.source == compiled.problem.source
    assert [a.name for a in target.signature] == ["input:0", "input:1"]
    assert target.signature[1].tensor is not None
    assert target.signature[1].tensor.shape == [4096, 4096]


def test_user_can_force_either_mode(tmp_store: ArtifactStore) -> None:
    parsed = parse_wrapper(wrapper_text("level1_001_relu_chain"))
    forced = build_segment(parsed, tmp_store, SearchMode.MULTI)
    assert forced.mode == SearchMode.MULTI and forced.mode_forced
    assert "automatic choice would be single" in forced.mode_reason
    parsed = parse_wrapper(wrapper_text("level3_001_small_mlp"))
    assert build_segment(parsed, tmp_store, SearchMode.SINGLE).targets[0].kind == TargetKind.FORWARD


def test_fusion_groups_are_adjacent_launches_without_library_calls(
    tmp_store: ArtifactStore,
) -> None:
    result = build_segment(parse_wrapper(wrapper_text("level2_004_conv_affine_relu")), tmp_store)
    # two layout copies before the conv form a group; the epilogue after it is alone
    assert [g.kernels for g in result.fusion_groups] == [
        ["triton_poi_fused_convolution_0", "triton_poi_fused_convolution_1"]
    ]
    group = next(t for t in result.targets if t.kind == TargetKind.FUSION_GROUP)
    assert [(a.expr, a.role) for a in group.signature] == [
        ("arg1_1", "in"),
        ("buf0", "out"),
        ("arg0_1", "in"),
        ("buf1", "out"),
    ]
    mlp = build_segment(parse_wrapper(wrapper_text("level3_001_small_mlp")), tmp_store)
    assert mlp.fusion_groups == []  # every activation sits between two GEMMs


def test_kernel_arguments_are_typed(tmp_store: ArtifactStore) -> None:
    result = build_segment(
        parse_wrapper(wrapper_text("level2_001_gemm_bias_relu")), tmp_store, SearchMode.MULTI
    )
    (kernel,) = result.kernels
    roles = [a.role for a in kernel.args]
    assert "scalar" in roles and ("inout" in roles or "out" in roles)
    for arg in kernel.args:
        if arg.role == "scalar":
            assert isinstance(arg.value, int)
        else:
            assert arg.tensor is not None and arg.tensor.dtype == "float32"
    assert kernel.grid.startswith("Grid")
    assert kernel.launch_site.startswith(f"{kernel.name}.run(")


def test_partition_layout_segments(tmp_store: ArtifactStore) -> None:
    parsed = parse_wrapper((DATA / "synthetic_partition_wrapper.py.txt").read_text())
    result = build_segment(parsed, tmp_store)
    assert result.mode == SearchMode.MULTI
    assert [len(k.launches) for k in result.kernels] == [2, 2]
    assert [g.lines for g in result.fusion_groups] == [[105, 107, 109]]
