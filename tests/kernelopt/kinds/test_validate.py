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
