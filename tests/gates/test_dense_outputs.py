"""A forward that returns a sparse, quantized or nested tensor is refused by name, in the
compile step and in the gates' reference, instead of crashing in a later comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gates.cascade import verify_candidate
from kernelopt.contracts.compiled import CompileInput
from kernelopt.contracts.problem import ProblemSpec
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.errors import ProblemError
from kernelopt.loaded_problem import check_dense_outputs
from kernelopt.store import open_store

BODY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.relu(), {output}


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""

QUANTIZED = "torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)"


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda x: x.to_sparse(), "sparse_coo tensor"),
        (lambda x: x.to_sparse_csr(), "sparse_csr tensor"),
        (lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8), "quantized tensor"),
        (lambda x: torch.nested.nested_tensor([x[:3], x[:5]]), "nested tensor"),
    ],
)
def test_unusual_outputs_are_named(make, kind: str) -> None:
    x = torch.randn(8, 8)
    check_dense_outputs([x, 2.0, None], "p.py")  # dense tensors and plain values pass
    with pytest.raises(ProblemError, match=f"output 1 of the forward is a {kind}; .*dense"):
        check_dense_outputs([x, make(x)], "p.py")


def test_the_compile_step_names_the_output(tmp_path: Path, monkeypatch) -> None:
    from kernelopt.kinds.registry import compile_on

    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store(tmp_path / "artifacts")
    spec = ProblemSpec(name="quantized", source=store.put_text(BODY.format(output=QUANTIZED)))
    inp = CompileInput(problem=spec, measure_default_mode=False, use_cache=False)
    with pytest.raises(ProblemError, match="output 1 of the forward is a quantized tensor"):
        compile_on(inp, store, "cpu", lambda fn: (fn(), 1.0)[1])


def test_the_gates_reference_names_the_output(tmp_path: Path, cpu_launcher: bool) -> None:
    problem = tmp_path / "sparse_output.py"
    problem.write_text(BODY.format(output="x.to_sparse()"))
    candidate = tmp_path / "identity.py"
    candidate.write_text(problem.read_text() + "\nModelNew = Model\n")
    settings = GateSettings(device="cpu", run_perf=False)
    result = verify_candidate(problem, candidate, settings, workdir=tmp_path / "w")
    assert not result.accepted
    assert "output 1 of the forward is a sparse_coo tensor" in result.reason, result.reason
