"""Cheat -- launch on a side stream: events on the current stream time nothing (GPU only)."""

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
    tl.store(y_ptr + offs, x * tl.sigmoid(x) * scale + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale
        self.side = torch.cuda.Stream()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):  # and no wait back on the caller's stream
            # Repeat the work so the hidden time is unmistakable.
            for _ in range(4):
                _swish_bias[(triton.cdiv(n, 1024),)](
                    x, self.bias, y, n, x.shape[-1], self.scale, BLOCK=1024
                )
        return y
