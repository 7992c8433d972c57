"""Runtime helpers that need no GPU: config pinning (with a stand-in autotuner), tensors I/O."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelopt.compile.runtime import (
    baseline_pins,
    chosen_configs,
    load_tensors,
    pin_configs,
    save_tensors,
)
from kernelopt.contracts.compiled import CompileResult
from kernelopt.store import open_store
from tests.support.wrappers import fixture_json, wrapper_text


class _Config:
    def __init__(self, block: int, warps: int) -> None:
        self.kwargs = {"XBLOCK": block}
        self.num_warps = warps
        self.num_stages = 1


class _Launcher:
    def __init__(self, config: _Config) -> None:
        self.config = config


class _Autotuner:
    """The attributes of Inductor's CachingAutotuner that pinning touches."""

    def __init__(self, blocks: list[int]) -> None:
        self.configs = [_Config(b, 4) for b in blocks]
        self.launchers: list[_Launcher] = []
        self.precompiled = 0

    def precompile(self) -> None:
        self.precompiled += 1
        self.launchers = [_Launcher(c) for c in self.configs]


def test_chosen_configs_then_pinning_picks_the_recorded_launcher() -> None:
    module = types.SimpleNamespace(k=_Autotuner([128, 256, 512]))
    module.k.precompile()
    module.k.launchers = [module.k.launchers[1]]  # what autotuning settled on
    pins = chosen_configs(module, ["k", "missing"])
    assert pins == {"k": {"kwargs": {"XBLOCK": 256}, "num_warps": 4, "num_stages": 1}}

    fresh = types.SimpleNamespace(k=_Autotuner([128, 256, 512]))
    assert pin_configs(fresh, pins) == []
    assert fresh.k.precompiled == 1
    (launcher,) = fresh.k.launchers
    assert launcher.config.kwargs == {"XBLOCK": 256}
    assert launcher.config.found_by_coordesc is True  # no coordinate descent on top


def test_pinning_never_fails_a_run() -> None:
    broken = types.SimpleNamespace(k=types.SimpleNamespace(launchers=None))
    pins = {"k": {"kwargs": {"XBLOCK": 1}, "num_warps": 1, "num_stages": 1}}
    assert pin_configs(broken, pins) == ["k"]


def test_baseline_pins_skip_kernels_whose_source_changed(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    name = "level1_009_softmax_rows"
    text = wrapper_text(name)
    kernel = "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0"
    pins = {kernel: {"kwargs": {"XBLOCK": 1}, "num_warps": 1, "num_stages": 1}}
    compiled = CompileResult.model_validate(fixture_json(name, "compile")).model_copy(
        update={"wrapper": store.put_text(text), "kernel_configs": pins}
    )
    assert baseline_pins(compiled, store, text) == pins
    marker = "'''\nimport triton\n"  # the first line of the kernel's own source
    changed = text.replace(marker, "'''\nimport triton  # candidate\n", 1)
    assert changed != text
    assert baseline_pins(compiled, store, changed) == {}


def test_tensors_round_trip_with_strides(tmp_path: Path) -> None:
    import torch

    store = open_store(tmp_path)
    t = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
    ref = save_tensors(store, [t, 7, [1, 2]], "x.pt")
    back = load_tensors(store, ref)
    assert torch.equal(back[0], t) and back[0].stride() == t.stride()
    assert back[1:] == [7, [1, 2]]


def test_compile_in_process_turns_off_inductors_worker_pool() -> None:
    """Triage and re-stitch load cached kernels in-process: no pool beside them."""
    from torch._inductor import async_compile, config

    from kernelopt.compile.runtime import compile_in_process

    # config.patch, not monkeypatch: undoing a monkeypatch deletes the option from
    # Inductor's config module, and every later compile in this process then fails
    with config.patch(compile_threads=8):
        compile_in_process()
        assert async_compile.get_compile_threads() == 1
        assert async_compile.AsyncCompile.use_process_pool() is False


def test_wrapper_process_without_a_gpu_says_so() -> None:
    """Triage and re-stitch fail with a typed, clear error on a machine without CUDA."""
    import torch

    from kernelopt.compile.runtime import prepare_wrapper_process
    from kernelopt.errors import NoGpuError

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(NoGpuError, match="needs a CUDA GPU"):
        prepare_wrapper_process()


FORWARD_CANDIDATE = """
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x, scale, y):
        self.calls = getattr(self, "calls", 0) + 1
        return {"sum": x * scale + y + self.w, "grad": torch.is_grad_enabled()}
"""


@pytest.mark.parametrize("grad", [True, False])
def test_a_forward_runner_orders_inputs_puts_baked_values_back_and_runs_without_grad(
    grad: bool,
) -> None:
    import torch

    from kernelopt.compile.runtime import ForwardRunner

    runner = ForwardRunner(
        FORWARD_CANDIDATE,
        ["input:y", "parameter:w", "input:x"],
        ["input", "parameter", "input"],
        0,
        [],
        "cpu",
        input_index=[2, None, 0],  # captured y first, the weight, then x
        picks=[("output", 1), ("output", 0)],  # the dict's leaves, in the wrapper's order
        num_outputs=2,
        constants={1: 10.0},  # ``scale``, a Python float the compile baked in
    )
    x, y, w = torch.ones(3), torch.full((3,), 2.0), torch.full((3,), 0.5)
    with torch.set_grad_enabled(grad):
        first, second = runner.call([y, w, x])
        again = runner.call([y, w, x])
    assert first is False  # the forward ran without grad, whatever the caller had on
    assert second.tolist() == [12.5, 12.5, 12.5]  # x * 10 + y + the captured weight
    assert again[1].tolist() == second.tolist() and runner.model.calls == 2
