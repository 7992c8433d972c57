"""Profile harnesses of accepted LLM candidates launch what the candidate defines.

A search round profiles its best state, often a candidate the LLM wrote: a
module with ``launch(*args)`` calling its own (autotuned or plain)
``@triton.jit`` kernels, maybe with the original kernel's name bound to that
Python function, or a ``ModelNew`` for a forward target.  Each fixture here is
one of those shapes; the harness is built by ``candidate_harnesses`` and
called on CPU tensors with the Triton interpreter (the captured kernel's
launch is injected: on the CPU no wrapper runs to capture it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelopt.compile.runtime import save_tensors
from kernelopt.compile.standalone_kernels import CapturedLaunch
from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.search import ProfileInput
from kernelopt.profiling.harness_files import candidate_harnesses
from kernelopt.profiling.harness_runner import load_harness
from kernelopt.profiling.profile import profile_target
from kernelopt.store import open_store
from tests.kernelopt.profiling.test_profiling_cpu import KERNEL, _profile_input
from tests.support.inductor_samples import POINTWISE

_ADD = """
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offs < xnumel
    a = tl.load(in_ptr0 + offs, mask=mask)
    b = tl.load(in_ptr1 + offs % 4096, mask=mask)
    tl.store(out_ptr0 + offs, a + b, mask=mask)
"""

# a kernel target's candidate: launch(*args) over an autotuned kernel, the original name bound to it
AUTOTUNED = f"""
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({{"XBLOCK": 1024}}, num_warps=4)], key=["xnumel"])
@triton.jit
def _add_rows(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):{_ADD}

def launch(*args):
    in0, in1, out, xnumel = args
    _add_rows[lambda meta: (triton.cdiv(xnumel, meta["XBLOCK"]),)](in0, in1, out, xnumel)


{KERNEL} = launch  # also under the original kernel's name
"""

# the same through a plain @triton.jit kernel that keeps the original kernel's name
PLAIN_JIT = f"""
import triton
import triton.language as tl


@triton.jit
def {KERNEL}(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK: tl.constexpr):{_ADD}

def launch(*args):
    in0, in1, out, xnumel = args
    {KERNEL}[(triton.cdiv(xnumel, 1024),)](in0, in1, out, xnumel, XBLOCK=1024)
"""

# a forward target's candidate: ModelNew whose forward calls a Python wrapper of its kernel
FORWARD = """
import torch
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def _double_triton(x):
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _double_triton(x)
"""


@pytest.fixture(autouse=True)
def interpreter(tmp_path: Path) -> Iterator[None]:
    """Triton's interpreter for the fixtures' kernels (read when a kernel is decorated)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRITON_INTERPRET", "1")
        env.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
        yield


@pytest.fixture
def store(tmp_path):
    """The store a harness's ``open_store()`` opens (under ``KERNELOPT_HOME``)."""
    return open_store(tmp_path / "home" / "artifacts")


def _state(store, source: str, kind: TargetKind = TargetKind.KERNEL) -> ProfileInput:
    """A non-root state of a target whose root is the Inductor kernel ``POINTWISE``."""
    inp = _profile_input(store, POINTWISE)
    target = inp.target.model_copy(update={"kind": kind})
    return inp.model_copy(update={"target": target, "source": store.put_text(source)})


def _inputs() -> list:
    gen = torch.Generator().manual_seed(0)
    in0 = torch.randn(256, 4096, generator=gen)
    in1 = torch.randn(4096, generator=gen)
    return [in0, in1, torch.zeros(256, 4096), 256 * 4096]


def _run(harness: Path, captured: list | None = None) -> tuple[list, object]:
    """get_args + call of a harness on the CPU; a captured harness gets ``captured`` injected."""
    module = load_harness(harness)
    if hasattr(module, "DEVICE"):
        module.DEVICE = "cpu"
    if "KernelHarness" in harness.read_text():
        module._STATE["launch"] = CapturedLaunch(KERNEL, None, captured, {"stream": 0})
        args = captured
    else:
        args = module.get_args()
    return args, module.call(args)


@pytest.mark.parametrize("source", [AUTOTUNED, PLAIN_JIT], ids=["autotuned", "plain-jit"])
def test_a_kernel_candidate_is_launched_through_its_launch(store, tmp_path, source):
    """On the H200 the autotuned shape failed with "'function' object has no attribute 'run'"."""
    found, missing = candidate_harnesses(_state(store, source), store, tmp_path / "h")
    assert [how for _, how in found] == ["captured", "built"] and missing == []
    args, _ = _run(found[0][0], _inputs())
    assert torch.equal(args[2], args[0] + args[1])
    args, _ = _run(found[1][0])  # the built harness: random tensors laid out as recorded
    assert torch.equal(args[2], args[0] + args[1])


def test_a_forward_candidate_runs_its_model_new_on_the_captured_arguments(store, tmp_path):
    """On the H200 this shape failed with "module 'kernelopt_profiled_state' has no attribute 'launch'"."""
    x = torch.randn(64, 96, generator=torch.Generator().manual_seed(1))
    inp = _state(store, FORWARD, TargetKind.FORWARD)
    compiled = inp.compiled.model_copy(
        update={"args": save_tensors(store, [x], "args"), "arg_names": ["input:0"]}
        | {"inputs": save_tensors(store, [x], "inputs")}
        | {"arg_roles": ["input"], "init_inputs": None}
    )
    found, missing = candidate_harnesses(
        inp.model_copy(update={"compiled": compiled}), store, tmp_path / "h"
    )
    _, out = _run(found[0][0], [x])
    assert torch.equal(out[0], x * 2)
    assert [how for _, how in found] == ["forward"] and missing == []


def test_a_fusion_group_state_is_launched_on_the_group_signature(store, tmp_path):
    """A group's launch takes the group's signature, not the dominant kernel's arguments."""
    group = AUTOTUNED.replace(
        "in0, in1, out, xnumel = args", "in0, in1, out = args\n    xnumel = out.numel()"
    )
    inp = _state(store, group, TargetKind.FUSION_GROUP)
    tensors = inp.segment.kernels[0].launches[0].args[:3]  # a signature has no numels
    target = inp.target.model_copy(update={"signature": list(tensors)})
    found, _ = candidate_harnesses(inp.model_copy(update={"target": target}), store, tmp_path)
    assert [how for _, how in found] == ["built"]
    args, _ = _run(found[0][0])
    assert torch.equal(args[2], args[0] + args[1])


def test_a_state_fitting_no_form_is_one_line_saying_why(store):
    inp = _state(store, "import torch\n\ndef helper(x):\n    return x\n")
    result = profile_target(inp, store)
    assert result.profile.source == "none"
    assert result.profile.note == (
        f"the state cannot be launched: candidate defines neither launch(*args) nor "
        f"def {KERNEL}(...) (see the candidate contract)"
    )
