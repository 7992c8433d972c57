"""The index tiles the template kernels start from, and the chunk loads they walk rows with,
written once for all of them.

A kernel file imports these helpers; ``render`` writes their definitions in
place of that import, so a candidate still stands alone with torch and triton
imports only.  Read as text, like every ``k_*.py``.
"""

import triton
import triton.language as tl


@triton.jit
def ko_row_tile(n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # this program's ROWS rows as a column: which exist, BLOCK column offsets, where each starts
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    return rows < n_rows, tl.arange(0, BLOCK)[None, :], rows.to(tl.int64) * n_cols


@triton.jit
def ko_row_chunk(x_row, row_ok, cols, start, end, other):
    # the BLOCK columns from ``start`` of a ko_row_tile's rows: their offsets, which lie before
    # ``end`` in a row that exists, and their values in float32 (``other`` where they do not)
    c = start + cols
    mask = row_ok & (c < end)
    return c, mask, tl.load(x_row + c, mask=mask, other=other).to(tl.float32)


@triton.jit
def ko_axis_tile(n_axis, n_inner, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    # program (o, j) walks axis 1 of [outer, n_axis, inner] at BLOCK_K inner positions (a row,
    # and which exist), BLOCK steps at a time (a column); where its slab [o, :, :] starts
    outer = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)[None, :]
    return k, k < n_inner, tl.arange(0, BLOCK)[:, None], outer * n_axis * n_inner
