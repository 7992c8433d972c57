"""Re-stitching text against the captured wrappers (CPU): what changes, and what must not."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelopt.compile.contract import CANDIDATE_CONTRACT
from kernelopt.compile.restitch import (
    FORM_FORWARD,
    FORM_INDUCTOR,
    FORM_LAUNCH,
    ReplacementError,
    build_restitched,
    detect_form,
    restitch_source,
)
from kernelopt.compile.segment import build_segment
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts.compiled import (
    CompileResult,
    Replacement,
    RestitchInput,
    SearchMode,
    SearchTarget,
    TargetKind,
)
from kernelopt.store import ArtifactStore, open_store
from tests.support.wrappers import DATA, fixture_json, fixture_names, wrapper_text

NAMES = fixture_names()
LAUNCH = "def launch(*args):\n    pass\n"


@pytest.fixture
def tmp_store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


def _multi(name: str, store: ArtifactStore):
    source = wrapper_text(name)
    return source, build_segment(parse_wrapper(source), store, SearchMode.MULTI)


@pytest.mark.parametrize("name", NAMES)
def test_identity_restitch_reproduces_the_wrapper_text(name: str, tmp_store: ArtifactStore) -> None:
    source, seg = _multi(name, tmp_store)
    pairs = [(t, tmp_store.get_text(t.source)) for t in seg.targets if t.kind == TargetKind.KERNEL]
    text, forms = restitch_source(source, seg, pairs)
    assert text == source
    assert set(forms.values()) == {FORM_INDUCTOR}


@pytest.mark.parametrize("name", NAMES)
def test_launch_form_replaces_exactly_the_kernel_launches(
    name: str, tmp_store: ArtifactStore
) -> None:
    source, seg = _multi(name, tmp_store)
    target = next(t for t in seg.targets if t.kind == TargetKind.KERNEL)
    kernel = target.kernels[0]
    text, forms = restitch_source(source, seg, [(target, LAUNCH)])
    assert forms == {target.id: FORM_LAUNCH}
    ast.parse(text)
    assert f"{kernel}.run(" not in text
    new = parse_wrapper(text)
    assert len(new.launches) == len(parse_wrapper(source).launches) - len(
        parse_wrapper(source).launches_of(kernel)
    )
    # every other kernel keeps its launch lines, byte for byte
    for other in seg.kernels:
        if other.name != kernel:
            assert other.launch_site in text
    assert sum(1 for ln in text.splitlines() if ".launch(" in ln) == len(
        parse_wrapper(source).launches_of(kernel)
    )
    launch_line = next(ln.strip() for ln in text.splitlines() if ".launch(" in ln)
    original_args = parse_wrapper(source).launches_of(kernel)[0].args
    assert launch_line.endswith(f".launch({', '.join(original_args)})")


def test_fusion_group_launch_runs_where_the_last_member_ran(tmp_store: ArtifactStore) -> None:
    source, seg = _multi("level2_004_conv_affine_relu", tmp_store)
    group = next(t for t in seg.targets if t.kind == TargetKind.FUSION_GROUP)
    text, _ = restitch_source(source, seg, [(group, LAUNCH)])
    lines = text.splitlines()
    launch_at = next(i for i, ln in enumerate(lines) if "_ko_cand_group0.launch(" in ln)
    conv_at = next(i for i, ln in enumerate(lines) if "extern_kernels.convolution(" in ln)
    assert launch_at < conv_at  # still before the library call that reads its outputs
    assert "launch(arg1_1, buf0, arg0_1, buf1)" in lines[launch_at]
    for member in group.kernels:
        assert f"{member}.run(" not in text
    # the first member's inputs are deleted only after the fused launch
    assert lines.index(next(ln for ln in lines if ln.strip() == "del arg1_1")) > launch_at
    ast.parse(text)


def test_group_dels_are_deferred_in_the_partition_layout(tmp_store: ArtifactStore) -> None:
    source = (DATA / "synthetic_partition_wrapper.py.txt").read_text()
    seg = build_segment(parse_wrapper(source), tmp_store)
    group = next(t for t in seg.targets if t.kind == TargetKind.FUSION_GROUP)
    text, _ = restitch_source(source, seg, [(group, LAUNCH)])
    body = text.split("def partition_0")[1].splitlines()
    at = next(i for i, ln in enumerate(body) if "_ko_cand_group0.launch(" in ln)
    assert body[at + 1].strip() == "del buf2"
    assert not any(ln.strip() == "del buf2" for ln in body[:at])


def test_inductor_form_with_a_different_signature_is_refused(tmp_store: ArtifactStore) -> None:
    source, seg = _multi("level1_001_relu_chain", tmp_store)
    target = seg.targets[0]
    original = tmp_store.get_text(target.source)
    changed = original.replace("xnumel, XBLOCK", "xnumel, extra, XBLOCK")
    with pytest.raises(ReplacementError, match="launch"):
        restitch_source(source, seg, [(target, changed)])


def test_inductor_form_substitutes_the_source_in_place(tmp_store: ArtifactStore) -> None:
    source, seg = _multi("level1_009_softmax_rows", tmp_store)
    target = seg.targets[0]
    original = tmp_store.get_text(target.source)
    changed = original.replace("import triton\n", "import triton  # tuned\n", 1)
    text, _ = restitch_source(source, seg, [(target, changed)])
    assert "import triton  # tuned" in text
    assert parse_wrapper(text).kernels[target.kernels[0]].source == changed
    assert text.replace("  # tuned", "", 1) == source


def test_conflicting_and_unknown_replacements_are_refused(tmp_store: ArtifactStore) -> None:
    source, seg = _multi("level2_004_conv_affine_relu", tmp_store)
    kernel = next(t for t in seg.targets if t.kind == TargetKind.KERNEL)
    group = next(t for t in seg.targets if t.kind == TargetKind.FUSION_GROUP)
    with pytest.raises(ReplacementError, match="replaced by both"):
        restitch_source(source, seg, [(kernel, LAUNCH), (group, LAUNCH)])
    ghost = SearchTarget(id="ghost", kind=TargetKind.KERNEL, kernels=["triton_ghost_0"])
    with pytest.raises(ReplacementError, match="not in this wrapper"):
        restitch_source(source, seg, [(ghost, LAUNCH)])


def test_detect_form() -> None:
    kernel = SearchTarget(id="k", kind=TargetKind.KERNEL, kernels=["k"])
    group = SearchTarget(id="group0", kind=TargetKind.FUSION_GROUP, kernels=["a", "b"])
    forward = SearchTarget(id="forward", kind=TargetKind.FORWARD)
    assert detect_form(kernel, "def k(in_ptr0, xnumel):\n    pass\n") == FORM_INDUCTOR
    assert detect_form(kernel, LAUNCH) == FORM_LAUNCH
    assert detect_form(group, LAUNCH) == FORM_LAUNCH
    assert detect_form(forward, "class ModelNew:\n    pass\n") == FORM_FORWARD
    assert detect_form(forward, "class Model:\n    pass\nModelNew = Model\n") == FORM_FORWARD
    for target, text in [
        (kernel, "def other():\n    pass\n"),
        (group, "def a(x):\n    pass\n"),
        (forward, LAUNCH),
        (kernel, "def launch(:\n"),
    ]:
        with pytest.raises(ReplacementError):
            detect_form(target, text)


def test_forward_candidate_becomes_a_forward_wrapper(tmp_store: ArtifactStore) -> None:
    name = "level1_001_relu_chain"
    recorded = CompileResult.model_validate(fixture_json(name, "compile"))
    compiled = recorded.model_copy(
        update={"wrapper": tmp_store.put_text(wrapper_text(name), name="w.py")}
    )
    seg = build_segment(parse_wrapper(wrapper_text(name)), tmp_store, compiled=compiled)
    cand = tmp_store.put_text("class ModelNew:\n    pass\n")
    inp = RestitchInput(
        compiled=compiled,
        segment=seg,
        replacements=[Replacement(target=seg.targets[0], source=cand)],
        run=False,
    )
    text, forms = build_restitched(inp, tmp_store)
    assert forms == {"forward": FORM_FORWARD}
    tree = ast.parse(text)
    assert "make_call" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "KERNELOPT_FORWARD = True" in text


def test_contract_text_names_every_form() -> None:
    for needle in ("launch(*args)", "ModelNew", "current stream", "IN PLACE", "fusion group"):
        assert needle.lower() in CANDIDATE_CONTRACT.lower()
