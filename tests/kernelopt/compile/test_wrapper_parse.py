"""Parsing Inductor wrappers captured on the H200 (torch 2.11) and the newest layout."""

from __future__ import annotations

import pytest

from kernelopt.compile.wrapper_parse import WrapperParseError, parse_wrapper
from tests.support.wrappers import DATA, FIXTURES, fixture_json, fixture_names, wrapper_text

NAMES = fixture_names()


def test_fixtures_exist_for_the_core_set() -> None:
    assert len(NAMES) >= 12


@pytest.mark.parametrize("name", NAMES)
def test_every_launch_matches_its_kernel_signature(name: str) -> None:
    parsed = parse_wrapper(wrapper_text(name))
    compiled = fixture_json(name, "compile")
    assert parsed.num_args == len(compiled["arg_names"])  # the captured flat arg list
    assert parsed.launches, "every core problem launches at least one Triton kernel"
    for event in parsed.launches:
        kernel = parsed.kernels[event.name]
        assert kernel.params, f"{event.name}: no runtime parameters parsed"
        assert len(event.args) >= len(kernel.params)
        assert event.kwargs.get("stream", "").startswith("stream")
        assert kernel.kind in {"pointwise", "reduction", "persistent_reduction", "template"}


@pytest.mark.parametrize("name", NAMES)
def test_default_mode_wrapper_parses_too(name: str) -> None:
    path = FIXTURES / f"{name}.default.py.txt"
    parsed = parse_wrapper(path.read_text())
    assert parsed.events


def test_library_calls_are_recognised() -> None:
    mlp = parse_wrapper(wrapper_text("level3_001_small_mlp"))
    assert [e.name for e in mlp.library_calls].count("extern_kernels.mm") >= 3
    conv = parse_wrapper(wrapper_text("level2_004_conv_affine_relu"))
    assert [e.name for e in conv.library_calls] == ["extern_kernels.convolution"]
    relu = parse_wrapper(wrapper_text("level1_001_relu_chain"))
    assert relu.library_calls == []


def test_buffer_layouts_come_from_the_text() -> None:
    parsed = parse_wrapper(wrapper_text("level2_004_conv_affine_relu"))
    launch = parsed.launches[0]
    spec = parsed.buffers[launch.args[1]]  # the channels-last copy of the input
    assert spec.shape == [32, 64, 56, 56]
    assert spec.stride == [200704, 1, 3584, 64]
    assert spec.dtype == "float32"


def test_newest_torch_layout_with_partition_functions() -> None:
    """Synthetic text shaped like torch 2.13's codegen: launches live in partition_0."""
    parsed = parse_wrapper((DATA / "synthetic_partition_wrapper.py.txt").read_text())
    assert parsed.wrapper_format == "runner-class"
    assert parsed.num_args == 3
    assert {e.function for e in parsed.events} == {"partition_0"}
    assert [e.kind for e in parsed.events] == ["launch", "library", "launch", "launch", "launch"]


@pytest.mark.parametrize(
    "text",
    ["def broken(:", "x = 1\n", "k = async_compile.triton('k', some_var)\ndef call(args): pass\n"],
)
def test_junk_is_rejected(text: str) -> None:
    with pytest.raises(WrapperParseError):
        parse_wrapper(text)
