"""Loading a kernel problem as a KernelBench-shaped problem, and the runtime checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt.errors import ProblemError
from kernelopt.kinds import validate
from kernelopt.kinds.registry import load_problem
from tests.kernelopt.kinds.conftest import PROBLEMS

HEADER = """
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    pass

"""


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + body)
    return path


def test_a_triton_file_loads_as_a_parameterless_reference_model() -> None:
    loaded = load_problem(PROBLEMS / "scale_add.py")
    assert loaded.kind == "triton" and loaded.kernel is not None
    assert loaded.kernel.kernels == ("_scale_add",) and loaded.kernel.entry == "launch"
    assert loaded.kernel.tunables == {"BLOCK": 64, "num_warps": 4}
    assert loaded.kernel.tune_space == {"BLOCK": [32, 64, 128], "num_warps": [1, 2, 4]}
    model = loaded.make_model(seed=0, device="cpu")
    assert isinstance(model, torch.nn.Module) and not list(model.parameters())
    x, b = loaded.make_inputs(seed=3, device="cpu")
    again = loaded.make_inputs(seed=3, device="cpu")
    assert torch.equal(x, again[0])
    assert torch.equal(model(x, b), x * 2.0 + b)  # Model is the reference
    assert loaded.make_init_inputs(0) == []
    assert [list(c[0].shape) for c in loaded.make_holdout_inputs(0, "cpu")] == [[13, 48]]


def test_input_count_must_fit_both_signatures(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "three_inputs",
        "def launch(x, y):\n    return x + y\n\n\n"
        "def reference(x, y):\n    return x + y\n\n\n"
        "def get_inputs():\n    return [torch.randn(4), torch.randn(4), torch.randn(4)]\n",
    )
    with pytest.raises(ProblemError, match=r"get_inputs\(\) yields 3 input\(s\) but launch"):
        load_problem(path)


def test_tune_may_only_name_launch_parameters(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "bad_tune",
        "def launch(x, *, BLOCK: int = 64):\n    return x\n\n\n"
        "def reference(x):\n    return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(4)]\n\n\n"
        "TUNE = {'XBLOCK': [32, 64]}\n",
    )
    with pytest.raises(ProblemError, match=r"TUNE\['XBLOCK'\] is not a keyword-only int"):
        load_problem(path)


def test_nondeterministic_reference_is_rejected_before_any_candidate_runs() -> None:
    loaded = load_problem(PROBLEMS / "noisy_reference.py")
    with pytest.raises(ProblemError) as info:
        validate.check_runtime(loaded.kernel, "cpu")
    assert "reference() is not deterministic" in info.value.reason
    assert info.value.path.endswith("noisy_reference.py")
    # the gates build the reference through ProblemFile: the same check runs there
    from gates.problem_io import ProblemFile

    problem = ProblemFile(PROBLEMS / "noisy_reference.py")
    with pytest.raises(ProblemError, match="not deterministic"):
        problem.build(problem.Model, 0, "cpu")


def test_inputs_must_be_reproducible_under_a_seed(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "clock_inputs",
        "import itertools\n\n_calls = itertools.count()\n\n\n"
        "def launch(x):\n    return x\n\n\n"
        "def reference(x):\n    return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(4) + next(_calls)]\n",
    )
    with pytest.raises(ProblemError, match="get_inputs\\(\\) is not reproducible"):
        validate.check_inputs_reproducible(load_problem(path).kernel)


def test_memory_is_estimated_on_the_meta_device_and_checked_on_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    huge = load_problem(PROBLEMS / "huge_inputs.py").kernel  # 2 TiB: never allocated
    (estimate,) = validate.estimate_memory(huge)
    assert estimate.input_bytes == 2**39 * 4 and estimate.output_bytes == 2**39 * 4
    assert validate.check_fits(huge, "cpu") == []  # no GPU: no check
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 141 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    with pytest.raises(ProblemError) as info:
        validate.check_fits(huge, "cuda")
    assert "do not fit in GPU memory" in info.value.reason
    assert "8192.00 GiB" in info.value.reason and "80.00 GiB free" in info.value.reason
    small = load_problem(PROBLEMS / "scale_add.py").kernel
    assert [e.set_name for e in validate.check_fits(small, "cuda")] == [
        "get_inputs()",
        "get_holdout_inputs()[0]",
    ]
