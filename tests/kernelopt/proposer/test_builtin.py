"""The built-in proposer on Inductor kernel sources: labelled launch-config variants, body untouched."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from kernelopt.contracts.compiled import (
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.search import BuiltinProposeInput
from kernelopt.proposer.builtin import NO_EVICTION_LABEL, propose
from kernelopt.proposer.inductor_source import (
    config_label,
    kernels_in_wrapper,
    parse_kernel,
    with_fixed_config,
)
from kernelopt.proposer.variants import config_space, neighbours, plausible
from kernelopt.store import open_store
from tests.support.compiled import stub_compiled
from tests.support.inductor_samples import PERSISTENT, POINTWISE, REDUCTION, TEMPLATE, WRAPPER

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wrappers"


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "artifacts")


def _inp(store, source: str, **kw) -> BuiltinProposeInput:
    ref = store.put_text(source, name="k.py")
    problem = ProblemSpec(name="p", source=ref)
    compiled = stub_compiled(problem, ref, "g", mode="max-autotune-no-cudagraphs", ms=1.0)
    segment = SegmentResult(
        kernels=[], library_calls=[], mode=SearchMode.MULTI, mode_reason="", targets=[]
    )
    target = SearchTarget(
        id="k0", kind=TargetKind.KERNEL, kernels=[parse_kernel(source).name], source=ref
    )
    return BuiltinProposeInput(
        compiled=compiled, segment=segment, target=target, state_source=ref, **kw
    )


def _function_body(source: str, name: str) -> str:
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(ast.get_source_segment(source, stmt) for stmt in func.body)


def test_the_sample_wrapper_defines_three_kernels():
    kernels = kernels_in_wrapper(WRAPPER)
    assert list(kernels) == [
        "triton_poi_fused_add_mul_relu_0",
        "triton_per_fused_relu_sum_1",
        "triton_red_fused_amax_2",
    ]
    assert kernels["triton_red_fused_amax_2"].strip() == REDUCTION.strip()


@pytest.mark.parametrize(
    ("source", "heuristic", "blocks", "body_blocks"),
    [
        (POINTWISE, "pointwise", ["XBLOCK"], {}),
        (PERSISTENT, "persistent_reduction", ["XBLOCK"], {"R0_BLOCK": 128}),
        (REDUCTION, "reduction", ["XBLOCK", "R0_BLOCK"], {}),
    ],
)
def test_kernel_launch_space_is_read_from_the_source(source, heuristic, blocks, body_blocks):
    kernel = parse_kernel(source)
    assert kernel.heuristic == heuristic
    assert kernel.block_params == blocks
    assert kernel.body_blocks == body_blocks
    assert kernel.sm_count == 132
    assert source[kernel.decorator_start :].startswith(f"@triton_heuristics.{heuristic}(")
    assert source[kernel.decorator_end :].lstrip().startswith("@triton.jit")
    space = config_space(kernel)
    assert space and all(plausible(kernel, c) for c in space)
    labels = [config_label(c) for c in space]
    assert len(labels) == len(set(labels))
    for config in space:
        for block in blocks:
            value = config[block]
            assert value & (value - 1) == 0  # powers of two only: elided masks stay valid
        if heuristic != "reduction":
            assert config["num_stages"] == 1


@pytest.mark.parametrize("source", [POINTWISE, PERSISTENT, REDUCTION])
def test_root_variants_are_labelled_pinned_and_keep_the_body(store, source):
    kernel = parse_kernel(source)
    result = propose(_inp(store, source, count=4), store)
    assert len(result.variants) == 4, result.note
    labels = [v.label for v in result.variants]
    assert len(set(labels)) == 4
    for variant in result.variants:
        text = store.get_text(variant.source)
        assert text.startswith(f"# kernelopt built-in variant: {variant.label}")
        if variant.label == NO_EVICTION_LABEL:
            assert "eviction_policy" not in text
            assert f"@triton_heuristics.{kernel.heuristic}(" in text
            continue
        pinned = parse_kernel(text)
        assert pinned.name == kernel.name
        assert pinned.heuristic == "fixed_config"
        assert pinned.fixed == variant.config
        assert config_label(pinned.fixed) == variant.label
        # the kernel itself is untouched: same parameters, same body, same metadata
        assert pinned.block_params == kernel.block_params
        assert _function_body(text, kernel.name) == _function_body(source, kernel.name)
        assert pinned.keywords["triton_meta"] == kernel.keywords["triton_meta"]
        assert pinned.keywords["inductor_meta"] == kernel.keywords["inductor_meta"]


def test_the_rewritten_decorator_binds_to_inductors_fixed_config():
    """The keywords we write are exactly what this torch's fixed_config accepts."""
    from torch._inductor.runtime import triton_heuristics

    kernel = parse_kernel(POINTWISE)
    text = with_fixed_config(
        POINTWISE, kernel, {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}, "x"
    )
    pinned = parse_kernel(text)
    signature = inspect.signature(triton_heuristics.fixed_config)
    signature.bind(**dict.fromkeys(pinned.keywords))  # raises TypeError on a mismatch
    assert set(pinned.keywords) == {"config", "filename", "triton_meta", "inductor_meta"}


def test_exclusions_give_new_variants_until_the_space_is_exhausted(store):
    first = propose(_inp(store, POINTWISE, count=4), store)
    second = propose(
        _inp(store, POINTWISE, count=4, exclude=[v.label for v in first.variants]), store
    )
    assert not {v.label for v in first.variants} & {v.label for v in second.variants}
    everything = [config_label(c) for c in config_space(parse_kernel(POINTWISE))] + [
        NO_EVICTION_LABEL
    ]
    exhausted = propose(_inp(store, POINTWISE, count=4, exclude=everything), store)
    assert exhausted.variants == []
    assert "exhausted" in exhausted.note


def test_a_pinned_state_proposes_its_neighbours(store):
    kernel = parse_kernel(REDUCTION)
    start = {"XBLOCK": 2, "R0_BLOCK": 1024, "num_warps": 4, "num_stages": 1}
    pinned_text = with_fixed_config(REDUCTION, kernel, start, config_label(start))
    result = propose(_inp(store, pinned_text, count=8), store)
    assert result.kernel_kind == "reduction"
    labels = [v.label for v in result.variants]
    assert NO_EVICTION_LABEL not in labels
    for variant in result.variants:
        moved = {k for k in start if variant.config[k] != start[k]}
        assert len(moved) == 1, variant.label  # one coordinate at a time
    expected = {config_label(c) for c in neighbours(parse_kernel(pinned_text), start)}
    assert set(labels) == expected
    # headers never stack up
    assert store.get_text(result.variants[0].source).count("# kernelopt built-in variant:") == 1


def test_unsupported_sources_give_a_note_not_an_error(store):
    template = propose(_inp(store, TEMPLATE), store)
    assert template.variants == [] and "template" in template.note
    ref = store.put_text("def launch(*args):\n    pass\n")
    inp = _inp(store, POINTWISE).model_copy(update={"state_source": ref})
    junk = propose(inp, store)
    assert junk.variants == [] and "not an Inductor kernel source" in junk.note


def _fixture_kernels() -> list[tuple[str, str]]:
    out = []
    for path in sorted(FIXTURES.glob("*.py.txt")) if FIXTURES.is_dir() else []:
        for name, source in kernels_in_wrapper(path.read_text()).items():
            out.append((f"{path.stem}:{name}", source))
    return out


@pytest.mark.skipif(not _fixture_kernels(), reason="no captured wrapper fixtures yet")
def test_every_captured_tunable_kernel_gets_parseable_variants(store):
    for label, source in _fixture_kernels():
        kernel = parse_kernel(source)
        result = propose(_inp(store, source, count=3), store)
        if not kernel.tunable:
            assert result.variants == [], label
            continue
        assert result.variants, f"{label}: {result.note}"
        for variant in result.variants:
            text = store.get_text(variant.source)
            ast.parse(text)
            assert f"def {kernel.name}(" in text


def _load(tmp_path, text: str, name: str):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"kernelopt_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("source", [POINTWISE, PERSISTENT, REDUCTION])
def test_variants_load_into_inductors_launcher_with_exactly_their_config(
    store, tmp_path, monkeypatch, source
):
    """Importing a variant builds Inductor's CachingAutotuner pinned to the labelled config.

    (CPU: the GPU driver check is stubbed; compiling and running is tests/e2e/test_gpu_search.py's job.)
    """
    from torch._inductor.runtime import triton_helpers
    from torch._inductor.runtime.triton_heuristics import HeuristicType

    monkeypatch.setattr(triton_helpers, "set_driver_to_gpu", lambda: None)
    kernel = parse_kernel(source)
    original = getattr(_load(tmp_path, source, "original"), kernel.name)
    assert original.heuristic_type != HeuristicType.FIXED
    result = propose(_inp(store, source, count=4), store)
    pinned = [v for v in result.variants if v.config]
    assert pinned
    for index, variant in enumerate(pinned):
        autotuner = getattr(
            _load(tmp_path, store.get_text(variant.source), f"v{index}"), kernel.name
        )
        assert autotuner.heuristic_type == HeuristicType.FIXED
        (config,) = autotuner.configs
        blocks = {k: v for k, v in variant.config.items() if k.endswith("BLOCK")}
        assert config.kwargs == blocks
        assert (config.num_warps, config.num_stages) == (
            variant.config["num_warps"],
            variant.config["num_stages"],
        )
        assert autotuner.fn.arg_names == original.fn.arg_names


def test_root_variants_walk_from_the_config_inductor_chose(store):
    pin = {"kwargs": {"XBLOCK": 1024}, "num_warps": 4, "num_stages": 1}
    inp = _inp(store, POINTWISE, count=5)
    inp = inp.model_copy(
        update={
            "compiled": inp.compiled.model_copy(
                update={"kernel_configs": {"triton_poi_fused_add_mul_relu_0": pin}}
            )
        }
    )
    result = propose(inp, store)
    labels = [v.label for v in result.variants]
    assert "XBLOCK=1024,num_warps=4,num_stages=1" not in labels  # that is the root itself
    assert labels[0] == NO_EVICTION_LABEL
    near = [v.config for v in result.variants[1:3]]
    for config in near:  # half the picks step one coordinate away from Inductor's choice
        moved = [
            k for k in ("XBLOCK", "num_warps") if config[k] != {"XBLOCK": 1024, "num_warps": 4}[k]
        ]
        assert len(moved) == 1, config
    assert len(set(labels)) == len(labels) == 5
