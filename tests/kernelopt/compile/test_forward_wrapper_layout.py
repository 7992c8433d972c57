"""A forward candidate's re-stitched wrapper stands where the baseline wrapper stood.

The captured argument list need not follow the forward's signature (an input changed in
place comes first), and a stateful forward's buffers are the captured tensors the gates
restore and compare.  On the H100 a campaign crashed at re-stitching because the forward
wrapper passed the inputs in the captured order (docs/TEAM_NOTES.md, the forty-eighth
session).  Each case compiles a small problem on the CPU and runs its forward wrapper as
``gate_model`` does (``wrapper_forward``), against the eager model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt.compile.restitch import build_restitched, forward_wrapper
from kernelopt.compile.runtime import wrapper_forward
from kernelopt.contracts.compiled import (
    CompileInput,
    Replacement,
    RestitchInput,
    SearchTarget,
    TargetKind,
)
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.store import open_store
from tests.support.paths import ROOT

CORPUS = ROOT / "tests" / "problems" / "identity"

SECOND_INPUT_IN_PLACE = (CORPUS / "inplace_second_input.py").read_text()
# the sum moved before the product, as the built-in rewrite family writes it
SUM_FIRST = """

class ModelNew(Model):
    def forward(self, x, w):
        w.clamp_(-0.5, 0.5)
        return x.sum(dim=0) @ w
"""

RUNNING_AVERAGE = (CORPUS / "ema_buffer.py").read_text()
AVERAGE_IN_PLACE = """

class ModelNew(Model):
    def forward(self, x):
        self.avg.lerp_(x.mean(dim=0), 0.1)
        return x - self.avg
"""
AVERAGE_REPLACED = """

class ModelNew(Model):
    def forward(self, x):
        self.avg = self.avg * 0.9 + 0.1 * x.mean(dim=0)
        return x - self.avg
"""

INPUT_FIRST = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x, x.sum(dim=1)


def get_inputs():
    return [torch.randn(4, 6)]


def get_init_inputs():
    return []
"""
INPUT_FIRST_NEW = """

class ModelNew(Model):
    def forward(self, x):
        x.add_(x)
        return x, x.sum(dim=1)
"""


@pytest.fixture
def compiled_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from kernelopt.kinds.registry import compile_on

    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store(tmp_path / "artifacts")

    def compile_source(source: str, name: str = "layout"):
        spec = ProblemSpec(name=name, source=store.put_text(source))
        inp = CompileInput(problem=spec, measure_default_mode=False)
        return compile_on(inp, store, "cpu", lambda fn: (fn(), 1.0)[1]), store

    return compile_source


def _namespace(source: str) -> dict:
    scope: dict = {}
    exec(compile(source, "<problem>", "exec"), scope)  # our own test text
    return scope


def _run_both(compiled, store, source: str, candidate: str, calls: int = 2):
    """The eager model and the forward wrapper, each on its own copy of the same inputs."""
    scope = _namespace(source)
    torch.manual_seed(0)
    model = scope["Model"](*scope["get_init_inputs"]())
    inputs = [t.clone() for t in scope["get_inputs"]()]
    text = forward_wrapper(compiled, source + candidate)
    forward = wrapper_forward(compiled, store, store.put_text(text), device="cpu")
    pairs = []
    for _ in range(calls):
        mine = [t.clone() for t in inputs]
        theirs = [t.clone() for t in inputs]
        with torch.no_grad():
            want = model(*mine)
            got = forward(*theirs)
        pairs.append((want, got, mine, theirs))
    return model, forward, pairs


def test_inputs_reach_the_forward_in_its_own_order(compiled_on_cpu) -> None:
    compiled, store = compiled_on_cpu(SECOND_INPUT_IN_PLACE)
    assert compiled.arg_input_index != sorted(compiled.arg_input_index)  # the case at hand
    _, _, pairs = _run_both(compiled, store, SECOND_INPUT_IN_PLACE, SUM_FIRST)
    for want, got, mine, theirs in pairs:
        torch.testing.assert_close(got[0], want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(theirs[1], mine[1])  # the clamp reached the caller's w


@pytest.mark.parametrize("candidate", [AVERAGE_IN_PLACE, AVERAGE_REPLACED])
def test_a_stateful_forward_updates_the_captured_state(compiled_on_cpu, candidate) -> None:
    compiled, store = compiled_on_cpu(RUNNING_AVERAGE)
    model, forward, pairs = _run_both(compiled, store, RUNNING_AVERAGE, candidate, calls=3)
    for want, got, _, _ in pairs:  # the second and third calls read the state the first left
        torch.testing.assert_close(got[0], want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(forward.state_entries["avg"], model.avg, rtol=1e-5, atol=1e-6)


def test_outputs_come_back_in_the_forward_order(compiled_on_cpu) -> None:
    compiled, store = compiled_on_cpu(INPUT_FIRST)
    _, _, pairs = _run_both(compiled, store, INPUT_FIRST, INPUT_FIRST_NEW, calls=1)
    ((want, got, _, theirs),) = pairs
    assert len(got) == 2
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(theirs[0], want[0])


LAZY_WITH_NOISE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.LazyLinear(8)

    def forward(self, x):
        return self.fc(x) + torch.randn(x.shape[0], 8)


def get_inputs():
    return [torch.randn(4, 6)]


def get_init_inputs():
    return []
"""
LAZY_NEW = """

class ModelNew(Model):
    pass
"""


def test_materialising_lazy_modules_leaves_the_seeded_random_stream_alone(compiled_on_cpu):
    """The first call's shape-finding call runs the forward once more: its draws must not
    move the stream the caller seeded for the real call."""
    compiled, store = compiled_on_cpu(LAZY_WITH_NOISE)
    text = forward_wrapper(compiled, LAZY_WITH_NOISE + LAZY_NEW)
    forward = wrapper_forward(compiled, store, store.put_text(text), device="cpu")
    baseline = wrapper_forward(compiled, store, compiled.wrapper, device="cpu")
    x = torch.randn(4, 6)
    with torch.no_grad():
        torch.manual_seed(3)
        want = baseline(x.clone())
        torch.manual_seed(3)
        got = forward(x.clone())
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)


# one of each layout the compile records: a dict and a nest of outputs, a Python float,
# constants (a string, a dtype, a shape), an
# input returned, state stored as an output (a counter, a rebound average, a spectral norm's
# vectors), state changed in place, an eval-mode file, lazy modules, Python scalar inputs
LAYOUTS = [
    "dict_output",
    "nested_mixed_output",
    "python_float_output",
    "constants_in_output",
    "returns_state_buffer",
    "call_counter_buffer",
    "rebound_buffer_average",
    "spectral_norm_train",
    "batchnorm1d_train",
    "batchnorm_eval_by_file",
    "lazy_modules",
    "scalar_forward_arg",
    "inplace_second_input",
]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point():
            return torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-4 * max(1.0, abs(a))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", LAYOUTS)
def test_modelnew_as_model_stands_where_the_baseline_wrapper_stands(compiled_on_cpu, name) -> None:
    """The identity ``ModelNew``, re-stitched as a forward candidate, answers as the compiled
    baseline does over two calls: outputs, inputs after the call, and the captured state."""
    from kernelopt.kinds.registry import load_problem

    source = (CORPUS / f"{name}.py").read_text()
    compiled, store = compiled_on_cpu(source, name)
    candidate = source + "\n\nclass ModelNew(Model):\n    pass\n"
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD, kernels=[])
    inp = RestitchInput(
        compiled=compiled,
        replacements=[Replacement(target=target, source=store.put_text(candidate))],
        run=False,
    )
    text, _ = build_restitched(inp, store)
    mine = wrapper_forward(compiled, store, store.put_text(text), device="cpu")
    baseline = wrapper_forward(compiled, store, compiled.wrapper, device="cpu")
    inputs = load_problem(CORPUS / f"{name}.py").make_inputs(0, "cpu")
    for call in range(2):
        ours = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        theirs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            torch.manual_seed(call)
            want = baseline(*theirs)
            torch.manual_seed(call)
            got = mine(*ours)
        assert _same(got, want), f"call {call}: outputs {got} != {want}"
        assert _same(ours, theirs), f"call {call}: the inputs after the call differ"
    for entry, value in baseline.state_entries.items():
        assert _same(mine.state_entries[entry], value), f"state {entry} differs"
