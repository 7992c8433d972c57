"""Honest algebraic win: diag(a) @ B is a row scale, O(N^2) instead of an O(N^3) GEMM."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_scale(a_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    s = tl.load(a_ptr + row)
    v = tl.load(b_ptr + row * n_cols + cols, mask=mask)
    tl.store(y_ptr + row * n_cols + cols, s * v, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        b = b.contiguous()
        rows, cols = b.shape
        y = torch.empty_like(b)
        _row_scale[(rows, triton.cdiv(cols, 1024))](a.contiguous(), b, y, cols, BLOCK=1024)
        return y
