"""Sum / mean / max / min over one axis of a contiguous tensor viewed as ``[outer, R, inner]``.

Three strategies, one host entry point:

* ``inner == 1``, enough rows: several rows per program, each row read in
  ``BLOCK`` slices with per-lane accumulators (multi-row);
* ``inner == 1``, few long rows: every row split into ``SPLIT`` chunks
  reduced by separate programs into a small workspace, which a second launch
  combines (two-stage split-row) -- so a handful of rows still fills the GPU;
* ``inner > 1`` (a strided axis): a program owns ``BLOCK_K`` adjacent inner
  positions and walks the reduced axis, so every load is coalesced.

Copied into candidates with k_tiles.py's helpers in place of their import: torch and
triton imports only.
"""

import torch
import triton
import triton.language as tl

from kernelopt.proposer.templates.k_tiles import ko_axis_tile, ko_row_chunk, ko_row_tile


@triton.jit
def _ko_combine(acc, x, OP: tl.constexpr):
    if OP == 0:
        return acc + x
    elif OP == 1:
        return tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
    else:
        return tl.minimum(acc, x, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ko_finish(acc, axis: tl.constexpr, OP: tl.constexpr):
    # max / min: a NaN anywhere makes the result NaN, as torch.amax / amin do
    if OP == 0:
        return tl.sum(acc, axis=axis)
    has_nan = tl.max((acc != acc).to(tl.int32), axis=axis) > 0
    if OP == 1:
        return tl.where(has_nan, float("nan"), tl.max(acc, axis=axis))
    else:
        return tl.where(has_nan, float("nan"), tl.min(acc, axis=axis))


@triton.jit
def _ko_reduce_last(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    chunk,
    scale,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    OP: tl.constexpr,
    NEUTRAL: tl.constexpr,
):
    # program (i, s) reduces columns [s * chunk, (s + 1) * chunk) of its rows into y[row, s]
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    row_ok, cols, row_at = ko_row_tile(n_rows, n_cols, ROWS, BLOCK)
    x_row = x_ptr + row_at
    lo = split * chunk
    hi = tl.minimum(lo + chunk, n_cols)
    acc = tl.full([ROWS, BLOCK], NEUTRAL, tl.float32)
    for start in range(0, chunk, BLOCK):
        _, _, x = ko_row_chunk(x_row, row_ok, cols, lo + start, hi, NEUTRAL)
        acc = _ko_combine(acc, x, OP)
    out = _ko_finish(acc, 1, OP) * scale
    rows_1d = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    y_at = y_ptr + rows_1d.to(tl.int64) * n_split + split
    tl.store(y_at, out.to(y_ptr.dtype.element_ty), mask=rows_1d < n_rows)


@triton.jit
def _ko_reduce_mid(
    x_ptr,
    y_ptr,
    n_red,
    n_inner,
    scale,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    OP: tl.constexpr,
    NEUTRAL: tl.constexpr,
):
    outer = tl.program_id(0).to(tl.int64)
    k, k_ok, r, slab = ko_axis_tile(n_red, n_inner, BLOCK_R, BLOCK_K)
    base = x_ptr + slab
    acc = tl.full([BLOCK_R, BLOCK_K], NEUTRAL, tl.float32)
    for start in range(0, n_red, BLOCK_R):
        rr = start + r
        mask = (rr < n_red) & k_ok
        x = tl.load(base + rr.to(tl.int64) * n_inner + k, mask=mask, other=NEUTRAL)
        acc = _ko_combine(acc, x.to(tl.float32), OP)
    out = _ko_finish(acc, 0, OP) * scale
    k1 = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    tl.store(y_ptr + outer * n_inner + k1, out.to(y_ptr.dtype.element_ty), mask=k1 < n_inner)


_KO_OPS = {"sum": (0, 0.0), "max": (1, float("-inf")), "min": (2, float("inf"))}


def ko_reduce(
    x: torch.Tensor,
    y: torch.Tensor,
    outer: int,
    n_red: int,
    inner: int,
    op: str,
    mean: bool,
    ROWS: int = 1,
    BLOCK: int = 1024,
    SPLIT: int = 1,
    BLOCK_K: int = 64,
    num_warps: int = 4,
) -> None:
    """Reduce contiguous ``x`` (``[outer, n_red, inner]``) over its middle axis into ``y``."""
    code, neutral = _KO_OPS[op]
    scale = 1.0 / n_red if mean else 1.0
    if inner > 1:
        grid = (outer, triton.cdiv(inner, BLOCK_K))
        _ko_reduce_mid[grid](
            x,
            y,
            n_red,
            inner,
            scale,
            BLOCK_R=BLOCK,
            BLOCK_K=BLOCK_K,
            OP=code,
            NEUTRAL=neutral,
            num_warps=num_warps,
        )
        return
    if SPLIT <= 1:
        grid = (triton.cdiv(outer, ROWS), 1)
        _ko_reduce_last[grid](
            x, y, outer, n_red, n_red, scale, ROWS, BLOCK, code, neutral, num_warps=num_warps
        )
        return
    chunk = triton.cdiv(triton.cdiv(n_red, SPLIT), BLOCK) * BLOCK
    n_split = triton.cdiv(n_red, chunk)
    partial = torch.empty((outer, n_split), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(outer, ROWS), n_split)
    _ko_reduce_last[grid](
        x, partial, outer, n_red, chunk, 1.0, ROWS, BLOCK, code, neutral, num_warps=num_warps
    )
    block2 = triton.next_power_of_2(n_split)
    _ko_reduce_last[(triton.cdiv(outer, ROWS), 1)](
        partial, y, outer, n_split, n_split, scale, ROWS, block2, code, neutral, num_warps=1
    )
