"""l2_normalize, plan "compile-fail", first attempt: calls a Triton function that does not exist."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_fancy_kernel(x_ptr, out_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    norm = tl.fancy_rownorm(x)
    tl.store(out_ptr + row * row_stride + cols, x / tl.maximum(norm, eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        l2_normalize_fancy_kernel[(n_rows,)](
            x, out, n_cols, n_cols, self.eps, BLOCK=triton.next_power_of_2(n_cols), num_warps=8
        )
        return out
