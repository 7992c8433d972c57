"""Cheat -- a systematic +5e-4 per stage: passes every 1e-3 check, compounds with depth."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _residual_tanh(x_ptr, h_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    h = tl.load(h_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * tl.abs(h))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(h < 0, -t, t)
    tl.store(y_ptr + offs, x + 0.1 * t + 5e-4, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        for layer in self.layers:
            h = F.linear(x, layer.weight, layer.bias)
            y = torch.empty_like(x)
            _residual_tanh[grid](x, h, y, n, BLOCK=1024)
            x = y
        return x
