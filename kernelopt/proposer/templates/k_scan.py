"""Inclusive prefix sum / product over one axis of a contiguous tensor viewed as ``[outer, N, inner]``.

Two layouts, one host entry point, both a single pass (every element read and
written once) built on ``tl.associative_scan``:

* ``inner == 1`` (the last axis): a program owns ``ROWS`` rows and walks them
  in ``BLOCK``-wide chunks; each chunk is scanned in registers and combined
  with the running carry of the chunks before it;
* ``inner > 1`` (a strided axis): a program owns ``BLOCK_K`` adjacent inner
  positions and walks the scanned axis ``BLOCK`` steps at a time, so every
  load is coalesced along the contiguous axis.

Masked lanes load the operation's neutral element, so the scan is flat past the
end of a row and the last lane always holds the chunk's full prefix (the carry).
Accumulation is float32 whatever the storage type.

Copied into candidates with k_tiles.py's helpers in place of their import: torch and
triton imports only.
"""

import torch
import triton
import triton.language as tl

from kernelopt.proposer.templates.k_tiles import ko_axis_tile, ko_row_chunk, ko_row_tile


@triton.jit
def _ko_add(a, b):
    return a + b


@triton.jit
def _ko_mul(a, b):
    return a * b


@triton.jit
def _ko_scan(x, axis: tl.constexpr, OP: tl.constexpr):
    if OP == 0:
        return tl.associative_scan(x, axis, _ko_add)
    else:
        return tl.associative_scan(x, axis, _ko_mul)


@triton.jit
def _ko_carry_in(carry, s, OP: tl.constexpr):
    if OP == 0:
        return carry + s
    else:
        return carry * s


@triton.jit
def _ko_scan_last(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    OP: tl.constexpr,
    NEUTRAL: tl.constexpr,
):
    row_ok, cols, base = ko_row_tile(n_rows, n_cols, ROWS, BLOCK)
    carry = tl.full([ROWS, 1], NEUTRAL, tl.float32)
    for start in range(0, n_cols, BLOCK):
        c, mask, x = ko_row_chunk(x_ptr + base, row_ok, cols, start, n_cols, NEUTRAL)
        s = _ko_carry_in(carry, _ko_scan(x, 1, OP), OP)
        tl.store(y_ptr + base + c, s.to(y_ptr.dtype.element_ty), mask=mask)
        # the last lane holds the prefix so far (exact: the other lanes add zeros)
        carry = tl.sum(tl.where(cols == BLOCK - 1, s, 0.0), axis=1)[:, None]


@triton.jit
def _ko_scan_mid(
    x_ptr,
    y_ptr,
    n_scan,
    n_inner,
    BLOCK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    OP: tl.constexpr,
    NEUTRAL: tl.constexpr,
):
    k, k_ok, r, base = ko_axis_tile(n_scan, n_inner, BLOCK, BLOCK_K)
    carry = tl.full([1, BLOCK_K], NEUTRAL, tl.float32)
    for start in range(0, n_scan, BLOCK):
        rr = start + r
        mask = (rr < n_scan) & k_ok
        at = base + rr.to(tl.int64) * n_inner + k
        x = tl.load(x_ptr + at, mask=mask, other=NEUTRAL).to(tl.float32)
        s = _ko_carry_in(carry, _ko_scan(x, 0, OP), OP)
        tl.store(y_ptr + at, s.to(y_ptr.dtype.element_ty), mask=mask)
        carry = tl.sum(tl.where(r == BLOCK - 1, s, 0.0), axis=0)[None, :]


_KO_SCAN_OPS = {"sum": (0, 0.0), "prod": (1, 1.0)}


def ko_scan(
    x: torch.Tensor,
    y: torch.Tensor,
    outer: int,
    n_scan: int,
    inner: int,
    op: str,
    ROWS: int = 1,
    BLOCK: int = 1024,
    BLOCK_K: int = 64,
    num_warps: int = 4,
) -> None:
    """Inclusive scan of contiguous ``x`` (``[outer, n_scan, inner]``) over its middle axis."""
    code, neutral = _KO_SCAN_OPS[op]
    if inner > 1:
        grid = (outer, triton.cdiv(inner, BLOCK_K))
        _ko_scan_mid[grid](
            x,
            y,
            n_scan,
            inner,
            BLOCK=BLOCK,
            BLOCK_K=BLOCK_K,
            OP=code,
            NEUTRAL=neutral,
            num_warps=num_warps,
        )
        return
    grid = (triton.cdiv(outer, ROWS),)
    _ko_scan_last[grid](x, y, outer, n_scan, ROWS, BLOCK, code, neutral, num_warps=num_warps)
