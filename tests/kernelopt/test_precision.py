"""The one numerics policy (float32, TF32 off) holds in every step that runs model code.

Compile and triage once ran at PyTorch's defaults (cuDNN TF32 on) while the gates
ran with TF32 off: on the H200 a level-2 convolution profiled at 0.09 ms in
triage and timed at 0.455 ms in gate 4.  These tests pin the policy on the CPU;
``tests/kernelopt/compile/test_capture_cpu.py`` checks compile's timings and
``tests/kernelopt/compile/test_gpu.py`` the kernels triage profiles on the GPU.
"""

from __future__ import annotations

import pytest
import torch

from kernelopt.compile import cache
from kernelopt.precision import strict_fp32, tf32_enabled


@pytest.fixture
def restore_precision():
    """Put this process's flags back: other tests run in the same interpreter."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
    torch.set_float32_matmul_precision(saved[2])


def _pytorch_defaults() -> None:
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
    torch.set_float32_matmul_precision("high")


def test_strict_fp32_turns_off_every_tf32_switch(restore_precision) -> None:
    _pytorch_defaults()
    assert tf32_enabled()
    strict_fp32()
    assert not tf32_enabled()
    assert torch.backends.cudnn.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_compile_cache_key_names_the_numerics_policy(monkeypatch) -> None:
    args = ("0" * 64, 1, "max-autotune-no-cudagraphs", "2.11", "3.6", "NVIDIA H200", False)
    before = cache.cache_key(*args)
    monkeypatch.setattr(cache, "POLICY", "float32, TF32 on")
    assert cache.cache_key(*args) != before
