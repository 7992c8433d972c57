"""Large problems on the CPU: the batch is cut to fit the budget, and the verdict says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.cascade import verify_candidate
from gates.cpu_budget import calls_per_check, cut
from kernelopt.contracts.verdicts import GateSettings

BODY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.lin(x{view}))


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
"""


def _files(tmp_path: Path, view: str) -> tuple[Path, Path]:
    problem = tmp_path / "wide.py"
    problem.write_text(BODY.format(view=view))
    candidate = tmp_path / "wide_identity.py"
    candidate.write_text(problem.read_text() + "\nModelNew = Model\n")
    return problem, candidate


def _settings(budget: float) -> GateSettings:
    return GateSettings(device="cpu", run_perf=False, cpu_budget_s=budget)


def test_cut_keeps_the_leading_rows_of_batch_tensors_only() -> None:
    import torch

    x, w = torch.arange(12.0).reshape(4, 3), torch.ones(3, 3)
    small = cut([x, w, 5], 4, 2)
    assert small[0].tolist() == x[:2].tolist() and small[1].shape == (3, 3) and small[2] == 5
    assert calls_per_check(6) > 6 * 3


def test_a_check_over_budget_runs_on_a_smaller_batch_and_says_so(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    problem, candidate = _files(tmp_path, "")
    result = verify_candidate(problem, candidate, _settings(1e-4), workdir=tmp_path / "w")
    assert result.accepted, result.reason
    assert "cut from batch 64 to 1" in result.environment["inputs"]
    assert "cut from batch 64" in result.environment["evaluation"]
    shapes = {c["set"]: c["input_shapes"] for c in result.verdicts[1].metrics["calls"]}
    assert shapes["seed0"] == [[1, 32]] and shapes["holdout_derived"] == [[2, 32]]


def test_within_budget_the_inputs_are_full_size(tmp_path: Path, cpu_launcher: bool) -> None:
    problem, candidate = _files(tmp_path, "")
    result = verify_candidate(problem, candidate, _settings(600.0), workdir=tmp_path / "w")
    assert result.accepted and "inputs" not in result.environment
    shapes = {c["set"]: c["input_shapes"] for c in result.verdicts[1].metrics["calls"]}
    assert shapes["seed0"] == [[64, 32]]
    assert "one reference call took" in result.environment["estimate"]


@pytest.mark.parametrize("view", [".view(64, 32)"])
def test_a_model_that_takes_no_other_batch_runs_full_size_with_an_estimate(
    tmp_path: Path, cpu_launcher: bool, view: str
) -> None:
    problem, candidate = _files(tmp_path, view)
    result = verify_candidate(problem, candidate, _settings(1e-4), workdir=tmp_path / "w")
    assert result.accepted, result.reason
    assert "inputs" not in result.environment
    assert "for the whole check" in result.environment["estimate"]
