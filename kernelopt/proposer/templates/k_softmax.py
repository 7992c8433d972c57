# ruff: noqa: SIM108 -- constexpr branches in @triton.jit bodies stay if/else blocks
"""Row softmax and log-softmax over the last axis: one pass when a row fits, else online.

A program owns ``ROWS`` rows.  When ``BLOCK`` covers the row, the row is read
once and written once.  Otherwise the running maximum and the running sum of
exponentials are carried per lane and rescaled as the maximum grows (the
online formulation), so the statistics take one read of the row and the
output one more -- where the textbook form takes three.  Copied into candidates
with k_tiles.py's helpers in place of their import: torch and triton imports only.
"""

import torch
import triton
import triton.language as tl

from kernelopt.proposer.templates.k_tiles import ko_row_chunk, ko_row_tile


@triton.jit
def _ko_softmax_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    LOG: tl.constexpr,
    SINGLE: tl.constexpr,
):
    row_ok, cols, row_at = ko_row_tile(n_rows, n_cols, ROWS, BLOCK)
    x_row = x_ptr + row_at
    y_row = y_ptr + row_at
    if SINGLE:
        _, mask, x = ko_row_chunk(x_row, row_ok, cols, 0, n_cols, float("-inf"))
        m = tl.max(x, axis=1)[:, None]
        e = tl.where(mask, tl.exp(x - m), 0.0)
        s = tl.sum(e, axis=1)[:, None]
        if LOG:
            y = x - m - tl.log(s)
        else:
            y = e / s
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        m_lane = tl.full([ROWS, BLOCK], float("-inf"), tl.float32)
        s_lane = tl.zeros([ROWS, BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            _, mask, x = ko_row_chunk(x_row, row_ok, cols, start, n_cols, float("-inf"))
            m_new = tl.maximum(m_lane, x)
            live = m_new != float("-inf")  # a lane that saw only -inf keeps a zero sum
            alpha = tl.where(live, tl.exp(m_lane - m_new), 0.0)
            p = tl.where(live, tl.exp(x - m_new), 0.0)
            s_lane = s_lane * alpha + p
            m_lane = m_new
        m = tl.max(m_lane, axis=1)[:, None]
        scale = tl.where(m_lane != float("-inf"), tl.exp(m_lane - m), 0.0)
        s = tl.sum(s_lane * scale, axis=1)[:, None]
        if LOG:
            shift = m + tl.log(s)
        else:
            inv = 1.0 / s
        for start in range(0, n_cols, BLOCK):
            c, mask, x = ko_row_chunk(x_row, row_ok, cols, start, n_cols, 0.0)
            if LOG:
                y = x - shift
            else:
                y = tl.exp(x - m) * inv
            tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=mask)


def ko_softmax(
    x: torch.Tensor,
    y: torch.Tensor,
    n_cols: int,
    log: bool,
    ROWS: int,
    BLOCK: int,
    num_warps: int,
) -> None:
    """Softmax (or log-softmax) of contiguous ``x`` viewed as rows of ``n_cols``, into ``y``."""
    n_rows = x.numel() // n_cols
    grid = (triton.cdiv(n_rows, ROWS),)
    _ko_softmax_kernel[grid](
        x,
        y,
        n_rows,
        n_cols,
        ROWS=ROWS,
        BLOCK=BLOCK,
        LOG=log,
        SINGLE=n_cols <= BLOCK,
        num_warps=num_warps,
    )
