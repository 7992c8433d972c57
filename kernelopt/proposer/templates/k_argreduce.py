# ruff: noqa: SIM108 -- constexpr branches in @triton.jit bodies stay if/else blocks
"""Argmax / argmin over the last axis, several rows per program, PyTorch's tie rules.

Each lane keeps the first index of its best value while the row is walked in
``BLOCK`` slices; the lanes are then combined by value and, among equals, by
the smallest index -- the first occurrence, as PyTorch returns.  A NaN wins
over every number (PyTorch treats NaN as the extreme), the first NaN first.
Copied into candidates with k_tiles.py's helpers in place of their import: torch and
triton imports only.
"""

import torch
import triton
import triton.language as tl

from kernelopt.proposer.templates.k_tiles import ko_row_chunk, ko_row_tile


@triton.jit
def _ko_arg_rows(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    IS_MIN: tl.constexpr,
):
    big = 2147483647
    row_ok, cols, row_at = ko_row_tile(n_rows, n_cols, ROWS, BLOCK)
    x_row = x_ptr + row_at
    best = tl.zeros([ROWS, BLOCK], tl.float32)
    idx = tl.full([ROWS, BLOCK], big, tl.int32)
    for start in range(0, n_cols, BLOCK):
        c, mask, x = ko_row_chunk(x_row, row_ok, cols, start, n_cols, 0.0)
        if IS_MIN:
            better = x < best
        else:
            better = x > best
        better = better | ((x != x) & (best == best)) | (idx == big)
        take = mask & better
        best = tl.where(take, x, best)
        idx = tl.where(take, c, idx)
    is_nan = best != best
    any_nan = tl.max(is_nan.to(tl.int32), axis=1)[:, None] > 0
    if IS_MIN:
        ext = tl.min(tl.where(is_nan, float("inf"), best), axis=1)[:, None]
    else:
        ext = tl.max(tl.where(is_nan, float("-inf"), best), axis=1)[:, None]
    hit = tl.where(any_nan, is_nan, best == ext) & (idx != big)
    first = tl.min(tl.where(hit, idx, big), axis=1)
    rows_1d = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    tl.store(y_ptr + rows_1d, first.to(y_ptr.dtype.element_ty), mask=rows_1d < n_rows)


def ko_argreduce(
    x: torch.Tensor,
    y: torch.Tensor,
    n_cols: int,
    is_min: bool,
    ROWS: int,
    BLOCK: int,
    num_warps: int,
) -> None:
    """Index of the max (min) of each row of contiguous ``x``, written in ``y``'s dtype."""
    n_rows = x.numel() // n_cols
    _ko_arg_rows[(triton.cdiv(n_rows, ROWS),)](
        x, y, n_rows, n_cols, ROWS=ROWS, BLOCK=BLOCK, IS_MIN=is_min, num_warps=num_warps
    )
