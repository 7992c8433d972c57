"""Broken -- stores far outside the output allocation: an illegal memory access (GPU only)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _oob(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs.to(tl.int64) * 1_000_003 + 4_000_000_000_000, x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        _oob[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
