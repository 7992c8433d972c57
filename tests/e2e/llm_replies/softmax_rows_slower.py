"""softmax_rows, plan "slower": correct, but three passes over each row, 32 columns at a time, one warp."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_three_pass_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    run_max = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf"))
        run_max = tl.maximum(run_max, x)
    row_max = tl.max(run_max, axis=0)
    run_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=-float("inf"))
        run_sum += tl.where(mask, tl.exp(x - row_max), 0.0)
    denom = tl.sum(run_sum, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, tl.exp(x - row_max) / denom, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        softmax_three_pass_kernel[(n_rows,)](
            x, out, n_cols, n_cols, BLOCK=32, num_warps=1, num_stages=1
        )
        return out
