"""layernorm, plan "good": one program per row, the row in registers, mean and variance in two in-register passes, one read and one write."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_row_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    y = centered * tl.rsqrt(var + eps) * w + b
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x):
        rows = x.contiguous().view(-1, x.shape[-1])
        out = torch.empty_like(rows)
        n_rows, n_cols = rows.shape
        layernorm_row_kernel[(n_rows,)](
            rows,
            self.norm.weight,
            self.norm.bias,
            out,
            n_cols,
            self.norm.eps,
            BLOCK=triton.next_power_of_2(n_cols),
            num_warps=8,
        )
        return out.view_as(x)
