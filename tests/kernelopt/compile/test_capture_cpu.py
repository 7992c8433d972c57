"""The capture pipeline end to end on the CPU (Inductor's C++ backend, a tiny problem).

The GPU path differs only in the device and the timer, so this checks on every
CI run what the H200 checks on real models: the flat argument list and its
roles, the content-hash cache, rehydration, ``wrapper_forward`` and the
single-kernel forward wrapper.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt.compile.modes import mode_options
from kernelopt.contracts.compiled import CompileInput, CompileResult, SearchMode, SegmentInput
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.precision import POLICY, tf32_enabled
from kernelopt.store import ArtifactStore, open_store
from tests.support.wrappers import DATA

SOURCE = (DATA / "tiny_linear_relu.py").read_text()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernelopt-home")


@pytest.fixture(scope="module")
def cpu_compiled(home: Path) -> tuple[CompileResult, CompileResult, ArtifactStore]:
    from kernelopt.kinds.registry import compile_on

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELOPT_HOME", str(home))
        store = open_store(home / "artifacts")
        spec = ProblemSpec(name="tiny", source=store.put_text(SOURCE))
        timer_calls: list[bool] = []  # whether TF32 was on during each timing

        def timer(fn) -> float:
            fn()
            timer_calls.append(tf32_enabled())
            return 1.0

        # the default-mode reference compile is skipped here: it doubles CPU compile time
        inp = CompileInput(problem=spec, measure_default_mode=False)
        saved = torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
        torch.backends.cudnn.allow_tf32 = True  # PyTorch's default: compile must turn it off
        try:
            first = compile_on(inp, store, "cpu", timer)
            second = compile_on(inp, store, "cpu", timer)
        finally:
            torch.backends.cudnn.allow_tf32 = saved[0]
            torch.set_float32_matmul_precision(saved[1])
        assert timer_calls == [False] * 3  # eager, compiled, wrapper (first call only), no TF32
        assert first.default_mode_ms is None
        assert first.inductor_options == mode_options(inp.mode)  # stated, reproducible
        return first, second, store


def test_flat_args_are_recorded_with_roles(cpu_compiled) -> None:
    first, _, _ = cpu_compiled
    assert sorted(first.arg_names) == [
        "buffer:shift",
        "input:0",
        "param:fc.bias",
        "param:fc.weight",
    ]
    roles = dict(zip(first.arg_names, first.arg_roles, strict=True))
    assert roles == {
        "param:fc.weight": "parameter",
        "param:fc.bias": "parameter",
        "input:0": "input",
        "buffer:shift": "buffer",
    }
    index = dict(zip(first.arg_names, first.arg_input_index, strict=True))
    assert index["input:0"] == 0 and index["param:fc.weight"] is None
    spec = first.arg_specs[first.arg_names.index("param:fc.weight")]
    assert spec.shape == [16, 16] and spec.dtype == "float32"
    assert first.wrapper_matches_compiled is True
    assert first.num_outputs == 1
    assert first.numerics == POLICY
    assert "cudagraphs" in first.mode_reason and first.mode == "max-autotune-no-cudagraphs"


def test_second_compile_is_a_cache_hit(cpu_compiled) -> None:
    first, second, _ = cpu_compiled
    assert not first.cache_hit and second.cache_hit
    assert second.cache_key == first.cache_key
    assert second.wrapper == first.wrapper and second.args == first.args
    # the compile says where its time went; a hit did none of that work
    assert list(first.stage_seconds) == [
        "imports",
        "problem",
        "capture",
        "save",
        "reference",
        "timing",
    ]
    assert second.stage_seconds == {}


def test_captured_args_are_the_real_weights(cpu_compiled) -> None:
    import torch

    from kernelopt.compile.runtime import load_tensors
    from kernelopt.kinds.registry import load_problem

    first, _, store = cpu_compiled
    args = load_tensors(store, first.args)
    model = load_problem(SOURCE, name="tiny").make_model(0, "cpu")
    weight = args[first.arg_names.index("param:fc.weight")]
    assert torch.equal(weight, model.fc.weight.detach())


def test_wrapper_forward_feeds_fresh_inputs_with_captured_weights(cpu_compiled, home) -> None:
    import torch

    from kernelopt.compile.runtime import load_tensors, wrapper_forward
    from kernelopt.kinds.registry import load_problem

    first, _, store = cpu_compiled
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELOPT_HOME", str(home))
        forward = wrapper_forward(first, store, device="cpu")
        (out,) = forward(*load_tensors(store, first.inputs))
        assert torch.equal(out, load_tensors(store, first.reference_output)[0])
        problem = load_problem(SOURCE, name="tiny")
        model = problem.make_model(0, "cpu")
        x = torch.randn(4, 16)
        (got,) = forward(x)
        torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


def test_rehydrate_regenerates_the_same_arguments(cpu_compiled, home) -> None:
    import torch

    from kernelopt.compile import rehydrate as rehydrate_module
    from kernelopt.compile.rehydrate import RehydrateError, rehydrate
    from kernelopt.compile.runtime import load_tensors

    first, _, store = cpu_compiled
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELOPT_HOME", str(home))
        tf32_during_reference: list[bool] = []
        real_run_call = rehydrate_module.run_call

        def run_call(module, args):
            tf32_during_reference.append(tf32_enabled())
            return real_run_call(module, args)

        mp.setattr(rehydrate_module, "run_call", run_call)
        mp.setattr(torch.backends.cudnn, "allow_tf32", True)  # PyTorch's default
        again = rehydrate(first, SOURCE, store.get_text(first.wrapper), store, device="cpu")
        assert tf32_during_reference == [False]  # the numerics re-stitch and gates run
        for a, b in zip(
            load_tensors(store, first.args), load_tensors(store, again.args), strict=True
        ):
            assert torch.equal(a, b)
        ref_a = load_tensors(store, first.reference_output)[0]
        assert torch.equal(ref_a, load_tensors(store, again.reference_output)[0])
        with pytest.raises(RehydrateError, match="changed"):
            rehydrate(first, SOURCE + "\n# edited\n", store.get_text(first.wrapper), store, "cpu")


def test_single_kernel_forward_wrapper_runs_model_new(cpu_compiled, home) -> None:
    import torch

    from kernelopt.compile.restitch import build_restitched
    from kernelopt.compile.runtime import load_tensors, wrapper_call
    from kernelopt.compile.segment import segment
    from kernelopt.contracts.compiled import Replacement, RestitchInput

    first, _, store = cpu_compiled
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELOPT_HOME", str(home))
        seg = segment(SegmentInput(compiled=first, mode=SearchMode.SINGLE), store)
        # a ModelNew that computes the same thing differently (and in float64)
        candidate = SOURCE + (
            "\n\nclass ModelNew(Model):\n"
            "    def forward(self, x):\n"
            "        y = x.double() @ self.fc.weight.double().t() + self.fc.bias.double()\n"
            "        return (torch.clamp(y + self.shift.double(), min=0) * 2.0).float()\n"
        )
        inp = RestitchInput(
            compiled=first,
            segment=seg,
            replacements=[Replacement(target=seg.targets[0], source=store.put_text(candidate))],
            run=False,
        )
        text, _ = build_restitched(inp, store)
        call = wrapper_call(first, store, store.put_text(text), device="cpu")
        (out,) = call(load_tensors(store, first.args))
        torch.testing.assert_close(out, load_tensors(store, first.reference_output)[0])


def test_inputs_whose_shape_changes_with_the_seed_end_the_compile_with_the_reason(
    home: Path,
) -> None:
    """The compiled forward is specialised to one shape; the gates feed it other seeds'
    inputs (before: the compiler's own wrapper failed gate 3 on an assertion about sizes)."""
    from kernelopt.compile.capture import CaptureError
    from kernelopt.kinds.registry import compile_on

    source = SOURCE.replace("def get_inputs():", "def _fixed_inputs():") + (
        "\n\ndef get_inputs():\n    import random\n"
        "    return [torch.randn(random.randint(2, 60), 16)]\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELOPT_HOME", str(home))
        store = open_store(home / "artifacts")
        spec = ProblemSpec(name="varying", source=store.put_text(source))
        inp = CompileInput(problem=spec, measure_default_mode=False)
        with pytest.raises(CaptureError, match="other inputs under other seeds: input 0 is a"):
            compile_on(inp, store, "cpu", lambda fn: 1.0)
