"""diag_matmul, plan "dispatch": the row-scale kernel, launched over a tile list built in Python.

Scripted for gate 4's case (docs/method.md#gates): the kernel itself replays dozens
of times faster than Inductor's GEMM from a CUDA graph, but forward() enumerates
every (row, column block) tile on the host on each call -- 262,144 tuples, some
10-20 ms of Python -- so the model as dispatched is slower than the baseline.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 64


@triton.jit
def diag_tile_kernel(a_ptr, b_ptr, out_ptr, n_cols, n_col_blocks, BLOCK: tl.constexpr):
    tile = tl.program_id(0).to(tl.int64)
    row = tile // n_col_blocks
    cols = (tile % n_col_blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    scale = tl.load(a_ptr + row)
    b = tl.load(b_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, scale * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        b = b.contiguous()
        out = torch.empty((a.shape[0], b.shape[1]), device=b.device, dtype=b.dtype)
        n_rows, n_cols = b.shape
        tiles = [(row, col) for row in range(n_rows) for col in range(0, n_cols, BLOCK)]
        n_col_blocks = triton.cdiv(n_cols, BLOCK)
        diag_tile_kernel[(len(tiles),)](a, b, out, n_cols, n_col_blocks, BLOCK=BLOCK, num_warps=2)
        return out
