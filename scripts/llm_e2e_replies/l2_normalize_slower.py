"""l2_normalize, plan "slower": correct, but two passes over each row, 32 columns at a time, one warp."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_two_pass_kernel(x_ptr, out_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0)
        acc += x * x
    norm = tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, x / norm, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        l2_normalize_two_pass_kernel[(n_rows,)](
            x, out, n_cols, n_cols, self.eps, BLOCK=32, num_warps=1, num_stages=1
        )
        return out
