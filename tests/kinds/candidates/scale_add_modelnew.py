"""Honest ModelNew candidate for scale_add: one program per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_scale_add(x_ptr, b_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * d + cols, x * 2.0 + b, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, b):
        x = x.contiguous()
        y = torch.empty_like(x)
        d = x.shape[-1]
        _row_scale_add[(x.numel() // d,)](x, b, y, d, BLOCK=triton.next_power_of_2(d))
        return y
