"""Units in the last place of a floating dtype: what two honest roundings can differ by.

Gate 2 (``gates.numerics``), its timed checks and the compile step's check that a
kernel problem's own baseline computes its reference share one rule for dtypes
coarser than the relative tolerance.
"""

from __future__ import annotations

import torch


def coarse_dtype(dtype: torch.dtype, rtol: float) -> torch.dtype | None:
    """``dtype`` when one unit in its last place is wider than ``rtol`` (bfloat16, the float8
    types), else None: an honest kernel that rounds once more or once less than eager is one
    unit away there, which gate 2 lets pass (``ulps``); two units or more stay errors, and
    gate 3's float64 rule bounds any bias."""
    if not dtype.is_floating_point or torch.finfo(dtype).eps <= rtol:
        return None
    return dtype


def ulps(r: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of ``dtype`` at each value of ``r`` (float64, finite)."""
    info = torch.finfo(dtype)
    _, exponent = torch.frexp(r)
    unit = torch.ldexp(torch.full_like(r, info.eps / 2), exponent)
    smallest = info.tiny * info.eps  # the spacing of subnormals, and at zero
    return unit.masked_fill_(r == 0, smallest).clamp_min_(smallest)
