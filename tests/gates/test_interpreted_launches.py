"""On the CPU a candidate whose Triton kernels never ran is not judged by their outputs.

A red team's ``device_branch`` runs a tanh-approximate GELU kernel on CUDA tensors and
returns ``F.gelu`` otherwise (a "CPU fallback"): the CPU's gates saw only the reference op
and accepted it.  Gate 2 now refuses a candidate none of whose kernels the interpreter ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cascade import verify_candidate
from gates.runner import forking_from
from gates.zygote import Zygote
from kernelopt.contracts.verdicts import CascadeResult, GateSettings

TESTS = Path(__file__).resolve().parents[1]
GELU = TESTS / "problems" / "gates" / "gelu.py"
DEVICE_BRANCH = TESTS / "fixtures" / "candidates" / "gates" / "device_branch.py"


def _verify(candidate: Path, work: Path) -> CascadeResult:
    settings = GateSettings(device="cpu", run_perf=False, static_timeout_s=120.0)
    return verify_candidate(GELU, candidate, settings, workdir=work)


def test_a_cpu_fallback_that_skips_every_kernel_is_refused_at_correctness(
    cpu_zygote: Zygote | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_GATES_SMALL", "1")
    with forking_from("cpu", cpu_zygote):
        result = _verify(DEVICE_BRANCH, tmp_path)
    assert not result.accepted
    correctness = result.verdicts[1]
    assert correctness.gate.value == "correctness" and not correctness.passed
    assert correctness.metrics["unrun_kernels"] == ["_gelu_tanh"]
    assert "never ran here" in result.feedback


def test_the_same_kernel_run_on_every_device_is_judged_by_its_outputs(
    cpu_zygote: Zygote | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the branch the kernel runs under the interpreter: gate 3 finds its tanh
    approximation (as ``tanh_gelu`` on the GPU), and nothing says a kernel went unrun."""
    monkeypatch.setenv("KERNELOPT_GATES_SMALL", "1")
    source = DEVICE_BRANCH.read_text().replace(
        "        if not x.is_cuda:\n            return F.gelu(x)  # CPU fallback\n", ""
    )
    assert source != DEVICE_BRANCH.read_text()
    candidate = tmp_path / "everywhere.py"
    candidate.write_text(source)
    with forking_from("cpu", cpu_zygote):
        result = _verify(candidate, tmp_path / "work")
    assert not result.accepted
    assert all("unrun_kernels" not in v.metrics for v in result.verdicts)
    assert result.verdicts[-1].gate.value == "model", [v.reason for v in result.verdicts]
