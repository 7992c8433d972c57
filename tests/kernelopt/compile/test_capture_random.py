"""Capture on the CPU: forwards that draw random numbers, and forwards it cannot take whole.

A forward that draws random numbers is captured with eager's random ops: Inductor's own
generators (a seeds buffer, then philox or its CPU counterpart in the kernels) never draw
what the seeded eager model draws, and every candidate derived from the capture is checked
against that eager model (on the H200 both built-in candidates of an alpha-dropout problem
failed gate 2 that way).  The capture pipeline itself: test_capture_cpu.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelopt.compile.capture import CaptureError, capture, random_ops, uses_inductor_rng


class _Noisy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.3, training=True) * 2 + torch.randn_like(x) * 0.1


class _Plain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2


def _seeded(fn, x: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(7)
    with torch.no_grad():
        return fn(x)


def test_a_random_forward_is_captured_with_eager_random_ops() -> None:
    torch._dynamo.reset()
    model, x = _Noisy(), torch.randn(8, 32)
    cap = capture(model, [x], "default")
    assert cap.fallback_random and cap.inductor_options("default") == {"fallback_random": True}
    assert not uses_inductor_rng([cap.source, *cap.extra_sources])
    assert torch.equal(_seeded(cap.compiled, x), _seeded(model, x))


def test_the_scan_reads_the_graph_on_fake_tensors_without_running_it() -> None:
    """The graph is traced before Inductor compiles it: one compile, and a model's state
    (batch norm's running statistics) and the generator move only by the real run."""
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(32, 32), nn.BatchNorm1d(32), nn.Dropout(0.2))
    x = torch.randn(8, 32)
    torch.manual_seed(3)
    cap = capture(model, [x], "default")
    assert cap.fallback_random and int(model[1].num_batches_tracked) == 1
    torch.manual_seed(3)
    with torch.no_grad():
        again = model(x)
    got = cap.output[0]  # the compiled run drew what eager draws: the same dropout mask
    assert torch.equal(again == 0, got == 0) and torch.allclose(again, got, atol=1e-5)


class _StridedSlice(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)[:, ::2]


@pytest.mark.parametrize(
    "model",
    [_StridedSlice(), nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8))],
    ids=["strided_slice", "conv_groupnorm"],
)
def test_the_scan_leaves_dynamos_guards_buildable(model: nn.Module) -> None:
    """The scan traces fake tensors of its own: traced on Dynamo's, it left symbols in
    Dynamo's shape environment and these forwards failed to compile (on the H200 too)."""
    torch._dynamo.reset()
    x = torch.randn(2, 3, 10, 10) if isinstance(model, nn.Sequential) else torch.randn(4, 10)
    cap = capture(model, [x], "default")
    assert not cap.fallback_random
    with torch.no_grad():
        assert torch.allclose(cap.output[0], model(x), atol=1e-5)


class _ScaledByItsSum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.3, training=True) * x.sum().item()


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_what_the_scan_cannot_trace_gives_no_ops_not_an_error() -> None:
    """A scan is no compile: a graph fake tensors cannot run (a value read back), or an
    input it cannot remake as one (a quantized tensor), gives no ops, and ``capture`` then
    reads the generated code instead."""
    assert random_ops(torch.fx.symbolic_trace(_Noisy()), [torch.randn(8, 32)])
    assert random_ops(torch.fx.symbolic_trace(_ScaledByItsSum()), [torch.randn(8, 32)]) == []
    quantized = torch.quantize_per_tensor(torch.randn(8, 32), 0.1, 0, torch.qint8)
    assert random_ops(torch.fx.symbolic_trace(nn.Identity()), [quantized]) == []


def test_a_forward_without_draws_is_captured_once_as_it_was() -> None:
    torch._dynamo.reset()
    cap = capture(_Plain(), [torch.randn(8, 32)], "default")
    assert not cap.fallback_random and cap.inductor_options("default") == {}


def test_the_generators_markers_in_triton_and_cpu_code() -> None:
    assert uses_inductor_rng(["tmp3 = tl.rand(tmp0, (tmp1).to(tl.uint32))"])
    assert uses_inductor_rng(["tmp2 = tl.randn(seed, offs)"])
    assert uses_inductor_rng(["tmp5 = triton_helpers.randint64(tmp0, offs, lo, hi)"])
    seeds = "aten.randint.low_out(-9223372036854775808, 9223372036854775807, [2], out=buf0)"
    assert uses_inductor_rng([seeds])
    assert not uses_inductor_rng(["tmp1 = tl.load(in_ptr0 + x0)", "torch.randint(0, 5, (3,))"])


def test_a_forward_torch_compile_cannot_take_whole_is_a_capture_error() -> None:
    """The compile step's refusal the campaign turns into a fallback outcome (on the H200,
    Inductor failed on rows indexed by a fresh permutation); a data-dependent branch is the
    refusal every torch version gives."""

    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if float(x.sum()) > 0 else x - 1

    torch._dynamo.reset()
    with pytest.raises(CaptureError, match="does not compile as one graph"):
        capture(Branchy(), [torch.randn(9, 4)], "default")


def test_hooks_on_the_model_itself_are_named_when_they_split_the_graph() -> None:
    class Counted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.register_buffer("calls", torch.zeros(()))
            self.register_forward_pre_hook(self._count)

        def _count(self, module: nn.Module, args: tuple) -> None:
            self.calls += 1

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * 2

    torch._dynamo.reset()
    with pytest.raises(CaptureError, match=r"2 graphs.*forward pre-hooks on itself"):
        capture(Counted(), [torch.randn(3, 4)], "default")


def test_code_that_still_draws_with_inductors_generators_is_compiled_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should the scan miss (a graph it cannot trace), the generated code gives it away."""
    import kernelopt.compile.capture as capture_module

    monkeypatch.setattr(capture_module, "random_ops", lambda gm, example_inputs: [])
    torch._dynamo.reset()
    model, x = _Noisy(), torch.randn(8, 32)
    cap = capture(model, [x], "default")
    assert cap.fallback_random and not uses_inductor_rng([cap.source, *cap.extra_sources])
    assert torch.equal(_seeded(cap.compiled, x), _seeded(model, x))


def test_a_second_compile_starts_from_the_buffers_as_built(monkeypatch) -> None:
    """Where the scan finds no draws but the generated code does draw, the forward is
    compiled again: from the buffers as built, not as the first compile's call left them
    (before, the second capture's batch-norm arguments had one batch in them)."""
    import kernelopt.compile.capture as capture_module

    monkeypatch.setattr(capture_module, "random_ops", lambda gm, example_inputs: [])
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(32, 32), nn.BatchNorm1d(32), nn.Dropout(0.2))
    cap = capture(model, [torch.randn(8, 32)], "default")
    assert cap.fallback_random
    counters = [a for a in cap.args if isinstance(a, torch.Tensor) and a.dtype == torch.int64]
    assert [int(c) for c in counters] == [0]
    assert int(model[1].num_batches_tracked) == 1  # put back between the compiles' calls
