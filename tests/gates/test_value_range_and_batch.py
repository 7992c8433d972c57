"""Gates 2-3 look past get_inputs()' own batch and value range (end to end on the CPU).

A kernel written for the one input get_inputs() draws can be right there and wrong for the
model: a grid sized for its batch leaves a larger batch's last rows unwritten, and a ReLU
dropped because the inputs happen to be positive is wrong for any negative value.  The
checker's own held-out batch (one row more, beside one row fewer) and the widened set
(float inputs times -32) catch both, and say when a model takes neither.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gates.cascade import verify_candidate
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.loaded_problem import another_batch
from tests.support.candidate_sources import product_problem

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.rand(64, 32)]


def get_init_inputs():
    return []
"""

ROWS_OF_GET_INPUTS = """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        out[:64] = torch.relu(x[:64]) * 2.0  # a grid of get_inputs()' 64 rows
        return out
"""

NO_RELU = """
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0  # get_inputs() draws only positive values
"""


def _verdict(tmp_path: Path, body: str, problem: str = PROBLEM) -> object:
    path = tmp_path / "relu_rows.py"
    path.write_text(problem)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(problem + body)
    settings = GateSettings(device="cpu", run_perf=False)
    return verify_candidate(path, candidate, settings, workdir=tmp_path / "w")


def test_one_row_more_is_held_out_beside_one_row_fewer() -> None:
    x = torch.arange(6.0).reshape(3, 2)
    fewer = another_batch([x], lambda: [x + 100])
    more = another_batch([x], lambda: [x + 100], grow=True)
    assert fewer[0].shape == (2, 2) and more[0].shape == (4, 2)
    assert more[0][:3].equal(x) and more[0][3].equal(x[0] + 100)  # the next draw's first row


def test_a_grid_sized_for_get_inputs_fails_on_one_row_more(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    result = _verdict(tmp_path, ROWS_OF_GET_INPUTS)
    assert not result.accepted
    v = result.verdicts[1]
    wrong = {c["set"] for c in v.metrics["calls"] if not c["ok"]}
    assert wrong == {"holdout_grown"}, v.reason
    assert "one row fewer or one more" in v.feedback


def test_a_term_dropped_for_positive_inputs_fails_on_widened_values(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    result = _verdict(tmp_path, NO_RELU)
    v = result.verdicts[1]
    wrong = {c["set"] for c in v.metrics["calls"] if not c["ok"]}
    assert not result.accepted and wrong == {"widened"}, v.reason
    assert "negated and scaled" in v.feedback


def test_the_identity_passes_and_the_checks_are_named(tmp_path: Path, cpu_launcher: bool) -> None:
    result = _verdict(tmp_path, "\nModelNew = Model\n")
    assert result.accepted, result.reason
    assert result.environment["widened_values"] == "widened"
    assert result.environment["held_out_shapes"] == "holdout_derived, holdout_grown"


def test_a_model_that_takes_no_widened_values_is_checked_without_them(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    sqrt = PROBLEM.replace("torch.relu(x) * 2.0", "torch.sqrt(x)")  # NaN for negative inputs
    result = _verdict(tmp_path, "\nModelNew = Model\n", problem=sqrt)
    assert result.accepted, result.reason
    assert result.environment["widened_values"].startswith("widened values skipped: ")
    assert "not finite" in result.environment["widened_values"]


PRODUCT = product_problem(96, 768, 96)

OTHER_ROUNDING = """
class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.double() @ b.double()).float()  # as exact as fp32 holds: other rounding
"""


def test_an_honest_kernel_with_other_rounding_passes_the_widened_set(
    tmp_path: Path, cpu_launcher: bool
) -> None:
    """The widened set grows the outputs 1024-fold here, and the rounding errors with them:
    gate 2's absolute tolerance grows as the reference's outputs did, or elements that
    cancel to near zero would fail an honest kernel there."""
    result = _verdict(tmp_path, OTHER_ROUNDING, PRODUCT)
    v = result.verdicts[1]
    assert v.passed, v.reason
    assert "widened" in {c["set"].partition("_")[0] for c in v.metrics["calls"]}
