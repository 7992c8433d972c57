"""Tensor helpers of the compile step: layout-keeping copies, argument specs, the bitwise check.

Copies keep sizes and strides because the wrapper asserts both.  Shared by the
compile step of every problem kind, rehydration and the standalone-kernel harness;
it imports torch only when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelopt.contracts.compiled import TensorSpec


def clone_exact(t: Any) -> Any:
    """A copy with the same sizes and strides (the wrapper asserts both)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach()
    try:
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        out.copy_(t)
        return out
    except RuntimeError:  # overlapping layouts (expanded tensors) cannot be written
        return t.clone()


def tensor_spec(value: Any) -> TensorSpec:
    """What a compiled result records of one argument: a tensor's layout, or a scalar's type."""
    import torch

    if not isinstance(value, torch.Tensor):
        return TensorSpec(shape=[], stride=[], dtype=type(value).__name__, device="cpu")
    return TensorSpec(
        shape=list(value.shape),
        stride=list(value.stride()),
        dtype=str(value.dtype).removeprefix("torch."),
        device=value.device.type,
    )


__all__ = ["clone_exact", "tensor_spec"]


def exact_match_and_max_diff(got: Sequence[Any], want: Sequence[Any]) -> tuple[bool, float | None]:
    """(bitwise equal, max |got - want|) over tuples of tensors; None when shapes differ.

    The compile step needs both: exactness decides whether a wrapper reproduces
    the model, and the largest difference says by how much it does not.  The
    gates' tolerance check is ``gates.numerics.compare_outputs``.
    """
    import torch

    if len(got) != len(want):
        return False, None
    exact = True
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            exact = exact and bool(a == b)
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, None
        a_c, b_c = a.detach(), b.detach().to(a.device)
        if not torch.equal(a_c, b_c):
            # NaNs in the same places are equal for our purpose (equal_nan)
            same_nan = (
                torch.equal(torch.isnan(a_c), torch.isnan(b_c)) if a.is_floating_point() else False
            )
            mask = ~torch.isnan(a_c) if a.is_floating_point() else None
            if not (same_nan and mask is not None and torch.equal(a_c[mask], b_c[mask])):
                exact = False
        if a.numel():
            diff = (a_c.double() - b_c.double()).abs()
            diff = diff[~torch.isnan(diff)]
            if diff.numel():
                worst = max(worst, float(diff.max()))
    return exact, worst
