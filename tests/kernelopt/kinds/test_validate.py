"""Bitwise equality with NaN equal to NaN: what the gates' mutation and determinism
checks and problem validation all use, fast path (``torch.equal``) included."""

from __future__ import annotations

import pytest
import torch

from kernelopt.kinds.validate import same_values


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), True),
        (torch.tensor([0.0, 2.0]), torch.tensor([-0.0, 2.0]), True),  # == says equal
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), False),
        (torch.tensor([float("inf")]), torch.tensor([float("inf")]), True),
        (torch.tensor([1, 2]), torch.tensor([1, 2]), True),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64), False),
        (torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 2.0]]), False),
        (torch.tensor([True, False]), torch.tensor([True, False]), True),
        (torch.tensor([1 + 1j, complex("nan")]), torch.tensor([1 + 1j, complex("nan")]), True),
        (3, 3, True),
    ],
)
def test_same_values_is_bitwise_equality_with_nan_equal_to_nan(a: object, b: object, same: bool):
    assert same_values(a, b) is same
    tensors = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    if (
        tensors
        and a.shape == b.shape
        and a.dtype == b.dtype
        and (a.is_floating_point() or a.is_complex())
    ):
        rule = bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())  # spelled out
        assert same_values(a, b) is rule


def test_a_bfloat16_baseline_one_unit_from_its_reference_computes_it() -> None:
    """The check that a kernel problem's own kernel computes its reference lets one unit in
    the last place of bfloat16 pass, as gate 2 does for candidates; two units do not."""
    from types import SimpleNamespace

    from kernelopt.kinds.validate import baseline_error

    problem = SimpleNamespace(entry="launch")
    ref = (torch.linspace(-3, 3, 1000, dtype=torch.float64) * 1.7).to(torch.bfloat16)
    ref[ref.abs().argmax()] = 5.0
    one = ref.clone()
    one[ref.abs().argmax()] = (ref[ref.abs().argmax()].view(torch.int16) + 1).view(torch.bfloat16)
    assert baseline_error(problem, [one], [ref]) is None
    two = ref.clone()
    two[ref.abs().argmax()] = (ref[ref.abs().argmax()].view(torch.int16) + 2).view(torch.bfloat16)
    assert "beyond rtol" in (baseline_error(problem, [two], [ref]) or "")
