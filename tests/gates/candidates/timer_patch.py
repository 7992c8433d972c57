"""Cheat -- an honest kernel, but the module rewires the timers when imported."""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl
import triton.testing

_real_perf_counter = time.perf_counter
time.perf_counter = lambda: _real_perf_counter() / 1000.0  # a clock 1000x slower
triton.testing.do_bench = lambda fn, *a, **k: (
    [0.001] * 10 if k.get("return_mode") == "all" else 0.001
)
if torch.cuda.is_available():
    torch.cuda.Event.elapsed_time = lambda self, end_event: 0.001


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _swish_bias[(triton.cdiv(n, 1024),)](
            x, self.bias, y, n, x.shape[-1], self.scale, BLOCK=1024
        )
        return y
