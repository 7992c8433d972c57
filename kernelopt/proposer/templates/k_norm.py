# ruff: noqa: SIM108 -- constexpr branches in @triton.jit bodies stay if/else blocks
"""Layer norm and RMS norm over the last axis, with optional weight and bias.

When ``BLOCK`` covers the row, the row is read once: mean and variance come
from registers (the centred two-pass formula, exact as Inductor's).  Longer
rows take one statistics pass -- sums of ``x - shift`` and of its square, the
shift being the row's first element so the variance does not cancel for rows
with a large mean -- and one normalising pass.  Copied into candidates with
k_tiles.py's helpers in place of their import: torch and triton imports only.
"""

import torch
import triton
import triton.language as tl

from kernelopt.proposer.templates.k_tiles import ko_row_chunk, ko_row_tile


@triton.jit
def _ko_norm_rows(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_rows,
    n_cols,
    eps,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    SINGLE: tl.constexpr,
):
    row_ok, cols, row_at = ko_row_tile(n_rows, n_cols, ROWS, BLOCK)
    x_row = x_ptr + row_at
    y_row = y_ptr + row_at
    if SINGLE:
        _, mask, x = ko_row_chunk(x_row, row_ok, cols, 0, n_cols, 0.0)
        if RMS:
            mean = 0.0
            var = tl.sum(x * x, axis=1)[:, None] / n_cols
        else:
            mean = tl.sum(x, axis=1)[:, None] / n_cols
            d = tl.where(mask, x - mean, 0.0)
            var = tl.sum(d * d, axis=1)[:, None] / n_cols
    else:
        if RMS:
            shift = tl.zeros([ROWS, 1], tl.float32)
        else:
            shift = tl.load(x_row, mask=row_ok, other=0.0).to(tl.float32)
        acc = tl.zeros([ROWS, BLOCK], tl.float32)
        acc2 = tl.zeros([ROWS, BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            _, mask, x = ko_row_chunk(x_row, row_ok, cols, start, n_cols, 0.0)
            d = tl.where(mask, x - shift, 0.0)
            acc += d
            acc2 += d * d
        s1 = tl.sum(acc, axis=1)[:, None] / n_cols
        s2 = tl.sum(acc2, axis=1)[:, None] / n_cols
        if RMS:
            mean = 0.0
            var = s2
        else:
            mean = shift + s1
            var = tl.maximum(s2 - s1 * s1, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = row_ok & (c < n_cols)
        if SINGLE:
            xv = x
        else:
            xv = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
        if RMS:
            y = xv * rstd
        else:
            y = (xv - mean) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def ko_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    y: torch.Tensor,
    n_cols: int,
    eps: float,
    rms: bool,
    ROWS: int,
    BLOCK: int,
    num_warps: int,
) -> None:
    """Normalise contiguous ``x`` viewed as rows of ``n_cols`` into ``y``."""
    n_rows = x.numel() // n_cols
    grid = (triton.cdiv(n_rows, ROWS),)
    _ko_norm_rows[grid](
        x,
        weight if weight is not None else x,
        bias if bias is not None else x,
        y,
        n_rows,
        n_cols,
        eps,
        ROWS=ROWS,
        BLOCK=BLOCK,
        RMS=rms,
        HAS_W=weight is not None,
        HAS_B=bias is not None,
        SINGLE=n_cols <= BLOCK,
        num_warps=num_warps,
    )
