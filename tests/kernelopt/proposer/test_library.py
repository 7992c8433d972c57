"""Library choices: detection from the wrapper, each candidate equal to the reference on the
CPU (float64), the opt-in flag, and the outcome/report field."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelopt.agents.roles import mechanical_experience
from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts import (
    Decision,
    LibraryCall,
    Outcome,
    OutcomeCategory,
    library_choices_of,
)
from kernelopt.contracts.compiled import (
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.search import (
    BuiltinProposeInput,
    Candidate,
    ProposerConfig,
    SummarizeInput,
)
from kernelopt.proposer.builtin import propose
from kernelopt.proposer.knowledge import family_of, gain_of, pattern_of
from kernelopt.proposer.library import (
    LibraryError,
    candidate_source,
    label_of,
    library_use,
    propose_library,
    read_header,
)
from kernelopt.proposer.library.family import CPU_NOTE
from kernelopt.report import render_markdown
from kernelopt.store import ArtifactStore, open_store
from tests.support.compiled import stub_compiled

FIXTURES = Path(__file__).parents[2] / "fixtures" / "wrappers"
TARGET = SearchTarget(id="forward", kind=TargetKind.FORWARD)

CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.up = nn.ConvTranspose2d(c_out, c_in, 2, stride=2)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(c_out))

    def forward(self, x):
        y = torch.relu(self.conv(x) * self.scale.view(1, -1, 1, 1))
        return self.up(y), y.sum(dim=(2, 3))


def get_inputs():
    return [torch.randn(2, 3, 6, 5)]


def get_holdout_inputs():
    return [[torch.randn(1, 3, 7, 9)]]


def get_init_inputs():
    return [3, 4]
"""

MLP = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 5)
        self.b = nn.Linear(5, 4)
        self.act = nn.ReLU()
        self.w = nn.Parameter(torch.randn(3, 4))
        self.bias = nn.Parameter(torch.randn(3))
        self.c = nn.Linear(3, 3)
        self.d = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = self.act(self.b(h))
        h = F.linear(h, self.w, self.bias).relu()
        pre = self.c(h)                      # read twice: not fused
        h = F.relu(pre) + pre
        return F.relu(self.d(h))             # no bias: no epilogue to fuse


def get_inputs():
    return [torch.randn(2, 7, 6)]


def get_holdout_inputs():
    return [[torch.randn(5, 6)]]


def get_init_inputs():
    return []
"""


def _load(text: str) -> types.ModuleType:
    ns = types.ModuleType("library_candidate")
    exec(compile(text, "<library_candidate>", "exec"), ns.__dict__)
    return ns


def _models(text: str) -> tuple[Any, Any, types.ModuleType]:
    """Model and ModelNew in float64, the captured weights copied in as ForwardRunner does."""
    ns = _load(text)
    torch.manual_seed(0)
    model = ns.Model(*ns.get_init_inputs()).double()
    torch.manual_seed(1)  # other values: only the copy below may make them equal
    new = ns.ModelNew(*ns.get_init_inputs()).double()
    state = new.state_dict()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            state[key].copy_(value)
    return model, new, ns


def _inputs(ns: types.ModuleType) -> list[list[torch.Tensor]]:
    return [[t.double() for t in inputs] for inputs in [ns.get_inputs(), *ns.get_holdout_inputs()]]


# --- detection -------------------------------------------------------------------------------


def _segment(name: str) -> SegmentResult:
    return SegmentResult.model_validate_json((FIXTURES / f"{name}.segment.json").read_text())


def test_library_calls_are_read_from_captured_wrappers() -> None:
    conv = library_use(_segment("level2_004_conv_affine_relu").library_calls)
    mlp = library_use(_segment("level3_001_small_mlp").library_calls)
    none = library_use(_segment("level1_001_relu_chain").library_calls)
    assert (conv.conv, conv.matmul) == (1, 0)
    assert (mlp.conv, mlp.matmul) == (0, 4)  # three mm and one addmm
    assert not none.any
    # the wrapper text itself gives the same answer as the segment step's list
    parsed = parse_wrapper((FIXTURES / "level2_004_conv_affine_relu.py.txt").read_text())
    calls = [
        LibraryCall(name=e.name, line=e.span.line, statement=e.text) for e in parsed.library_calls
    ]
    assert library_use(calls) == conv
    other = [
        LibraryCall(name=n, line=1, statement=n)
        for n in (
            "aten.cudnn_convolution.default",
            "torch.ops.aten.bmm.default",
            "extern_kernels.sort",
        )
    ]
    assert (library_use(other).conv, library_use(other).matmul) == (1, 1)


# --- candidates on the CPU -------------------------------------------------------------------


def test_channels_last_converts_weights_and_inputs_and_returns_the_reference_layout() -> None:
    text = candidate_source(CONV, ["channels_last"])
    assert read_header(text) == ["channels_last"] and read_header(CONV) is None
    model, new, ns = _models(text)
    for conv in (new.conv, new.up):  # still channels_last after the captured weights came in
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
        assert not conv.weight.is_contiguous()
    seen: list[bool] = []
    new.conv.register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
    )
    for inputs in _inputs(ns):
        want, got = model(*inputs), new(*inputs)
        assert isinstance(got, tuple) and len(got) == len(want)
        for w, g in zip(want, got, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
            assert g.stride() == w.stride()  # the reference's layout, not channels_last
    assert seen == [True, True]


def test_cudnn_benchmark_is_scoped_to_the_candidates_calls_and_restored() -> None:
    text = candidate_source(CONV, ["cudnn_benchmark"])
    model, new, ns = _models(text)
    during: list[bool] = []
    new.conv.register_forward_pre_hook(lambda *_: during.append(torch.backends.cudnn.benchmark))
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    try:
        for inputs in _inputs(ns):
            torch.testing.assert_close(new(*inputs), model(*inputs), rtol=0, atol=0)
            assert torch.backends.cudnn.benchmark is False  # nothing outlives the call
        with pytest.raises(RuntimeError):
            new(torch.randn(2, 5, 6, 5, dtype=torch.float64))  # wrong channels: conv raises
        assert torch.backends.cudnn.benchmark is False  # restored on the error path too
    finally:
        torch.backends.cudnn.benchmark = before
    assert during == [True, True, True]


def test_addmm_activation_fuses_exactly_the_linear_relu_pairs() -> None:
    text = candidate_source(MLP, ["addmm_activation"])
    forward = text.split("class _KoLibraryForward", 1)[1]
    assert forward.count("_addmm_activation.default(") == 3  # a, b and F.linear; not c, d
    assert "gelu" not in forward
    model, new, ns = _models(text)
    for inputs in _inputs(ns):  # rank 3, then rank 2
        torch.testing.assert_close(new(*inputs), model(*inputs), rtol=1e-13, atol=1e-13)


def test_gelu_and_unbiased_linears_give_no_epilogue_candidate() -> None:
    gelu = MLP.replace("torch.relu(self.a(x))", "F.gelu(self.a(x))")
    gelu = gelu.replace("self.act(self.b(h))", "F.gelu(self.b(h))")
    gelu = gelu.replace("F.linear(h, self.w, self.bias).relu()", "F.linear(h, self.w, self.bias)")
    with pytest.raises(LibraryError):
        candidate_source(gelu, ["addmm_activation"])
    with pytest.raises(LibraryError):
        candidate_source(MLP, ["no_such_choice"])


def test_choices_combine_in_one_candidate() -> None:
    text = candidate_source(CONV, ["cudnn_benchmark", "channels_last"])
    assert read_header(text) == ["channels_last", "cudnn_benchmark"]
    model, new, ns = _models(text)
    for inputs in _inputs(ns):
        torch.testing.assert_close(new(*inputs), model(*inputs), rtol=1e-12, atol=1e-12)


# --- the family and the flag -----------------------------------------------------------------


def _input(
    store: ArtifactStore, source: str, calls: list[str], gpu: str = "cpu", state: str = ""
) -> BuiltinProposeInput:
    blob = store.put_text("unused in forward mode", name="placeholder")
    problem = store.put_text(source, name="p.py")
    compiled = stub_compiled(ProblemSpec(name="p", source=problem), blob, gpu)
    segment = SegmentResult(
        kernels=[],
        library_calls=[LibraryCall(name=n, line=i + 1, statement=n) for i, n in enumerate(calls)],
        mode=SearchMode.SINGLE,
        mode_reason="test",
        targets=[TARGET],
    )
    return BuiltinProposeInput(
        compiled=compiled,
        segment=segment,
        target=TARGET,
        state_source=store.put_text(state) if state else problem,
        count=4,
    )


def test_the_family_offers_what_the_library_calls_and_the_device_allow(tmp_path: Path) -> None:
    store = open_store(tmp_path / "artifacts")
    conv = ["extern_kernels.convolution"]
    found, note = propose_library(_input(store, CONV, conv), store, 4, set())
    assert [v.label for v in found] == ["library:channels_last"]
    assert CPU_NOTE in note  # cuDNN's benchmark mode does nothing on the CPU: said, not offered
    found, note = propose_library(_input(store, CONV, conv, gpu="NVIDIA H200"), store, 4, set())
    assert [v.label for v in found] == [
        "library:channels_last",
        "library:cudnn_benchmark",
        "library:channels_last+cudnn_benchmark",
    ]
    assert all(read_header(store.get_text(v.source)) for v in found) and note == ""
    found, _ = propose_library(
        _input(store, CONV, conv, gpu="NVIDIA H200"), store, 4, {"library:channels_last"}
    )
    assert "library:channels_last" not in [v.label for v in found]
    # a state that already makes a choice is extended by one more
    state = candidate_source(CONV, ["channels_last"])
    found, _ = propose_library(
        _input(store, CONV, conv, gpu="NVIDIA H200", state=state), store, 4, set()
    )
    assert [v.label for v in found] == ["library:channels_last+cudnn_benchmark"]
    found, _ = propose_library(_input(store, MLP, ["extern_kernels.mm"]), store, 4, set())
    assert [v.label for v in found] == ["library:addmm_activation"]
    found, note = propose_library(_input(store, MLP, ["aten.sort"]), store, 4, set())
    assert not found and "no convolution or matmul" in note


def test_library_variants_only_with_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelopt.proposer.regen as regen

    # Inductor regeneration is another family's test; here it offers nothing
    monkeypatch.setattr(regen, "propose_regen", lambda *_: ([], "regen not under test"))
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store(tmp_path / "artifacts")
    inp = _input(store, CONV, ["extern_kernels.convolution"])
    monkeypatch.delenv("KERNELOPT_LIBRARY_CHOICES", raising=False)
    off = [v.label for v in propose(inp, store).variants]
    assert not [label for label in off if label.startswith("library:")]
    monkeypatch.setenv("KERNELOPT_LIBRARY_CHOICES", "1")
    on = [v.label for v in propose(inp, store).variants]
    assert "library:channels_last" in on


def test_knowledge_names_the_family_and_its_pattern() -> None:
    assert label_of(["cudnn_benchmark", "channels_last"]) == "library:channels_last+cudnn_benchmark"
    assert family_of("library:channels_last") == "library"
    assert pattern_of("library:addmm_activation") == "library:addmm_activation"
    won = _decision("c1", "library:channels_last+cudnn_benchmark", True)
    (lesson,) = mechanical_experience(
        SummarizeInput(
            target=TARGET, outcomes=[], decisions=[won], proposer=ProposerConfig(), use_llm=False
        )
    )
    assert lesson.action.startswith("make the library choice library:channels_last+")
    assert "direction/library" in lesson.tags and gain_of(lesson.effect) == 1.2


# --- outcome and report ----------------------------------------------------------------------


def test_outcome_records_choices_and_old_outcomes_load() -> None:
    old = Outcome.model_validate(
        {"campaign_id": "c", "problem": "p", "category": "fallback", "speedup": 1.0, "reason": "r"}
    )
    assert old.library_choices == []
    labels = ["library:channels_last+cudnn_benchmark", "rewrite:dead-code", "library:channels_last"]
    assert library_choices_of(labels) == ["library:channels_last", "library:cudnn_benchmark"]


def _decision(cid: str, label: str, accepted: bool) -> Decision:
    cand = Candidate(
        id=cid, target_id="forward", parent_id=None, iteration=0, source=None, label=label
    )
    return Decision(
        candidate=cand, accepted=accepted, reason="r", speedup=1.2 if accepted else None
    )


def test_the_report_shows_library_choices_apart() -> None:
    kept = Outcome(
        campaign_id="c",
        problem="p",
        category=OutcomeCategory.OPTIMIZED,
        speedup=1.2,
        reason="r",
        library_choices=["library:channels_last"],
    )
    decisions = [
        _decision("c1", "library:channels_last", True),
        _decision("c2", "library:cudnn_benchmark", False),
        _decision("c3", "BLOCK=64", True),
    ]
    text = render_markdown(kept, decisions)
    assert "| library choices (change f) | library:channels_last |" in text
    section = text.split("## Library choices (change f)", 1)[1].split("## ", 1)[0]
    assert (
        "Kept: `library:channels_last`." in section and "change the library fraction f" in section
    )
    assert "| c1 | library:channels_last | passed | 1.200x |" in section
    assert "| c2 | library:cudnn_benchmark | rejected | - |" in section and "c3" not in section
    plain = kept.model_copy(update={"library_choices": []})
    assert "## Library choices" not in render_markdown(plain, decisions[2:])
    assert "| library choices (change f) | - |" in render_markdown(plain, decisions[2:])
