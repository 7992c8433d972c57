"""relu_chain, plan "slower": correct, but one single-warp program per row walking 32 columns at a time."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_chain_rowloop_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        y = tl.maximum(x * 2.0 + 1.0, 0.0)
        z = tl.maximum(y * 0.5 - 0.25, 0.0)
        tl.store(out_ptr + base + cols, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        relu_chain_rowloop_kernel[(n_rows,)](x, out, n_cols, BLOCK=32, num_warps=1, num_stages=1)
        return out
