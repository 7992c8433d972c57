"""diag_matmul, plan "good": diag(a) @ b is a row scaling; one read of b, one write, no GEMM."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def diag_rowscale_kernel(a_ptr, b_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
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
        grid = (n_rows, triton.cdiv(n_cols, 1024))
        diag_rowscale_kernel[grid](a, b, out, n_rows, n_cols, BLOCK=1024, num_warps=4)
        return out
