"""Subtly wrong: the sigmoid rounded to fp16 "to save registers" -- inside gate 2's 1e-3.

An error of this size passes every 1e-3 check, but against float64 it is a
thousand times the fp32 reference's own rounding error: gate 3 rejects it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _swish_bias(x_ptr, b_ptr, y_ptr, n, d, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % d, mask=mask)
    s = tl.sigmoid(x).to(tl.float16).to(tl.float32)  # the gate kept in half precision
    tl.store(y_ptr + offs, x * s * scale + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _swish_bias[(triton.cdiv(n, 1024),)](
            x, self.bias, y, n, x.shape[-1], self.scale, BLOCK=1024
        )
        return y
