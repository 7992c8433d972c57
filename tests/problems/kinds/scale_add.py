"""A standalone Triton problem for CPU tests: y = x * scale + b (small sizes, interpreter)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add(x_ptr, b_ptr, y_ptr, n, d, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % d, mask=mask)
    tl.store(y_ptr + offs, x * scale + b, mask=mask)


def launch(x, b, *, BLOCK: int = 64, num_warps: int = 4):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _scale_add[(triton.cdiv(n, BLOCK),)](
        x, b, y, n, x.shape[-1], 2.0, BLOCK=BLOCK, num_warps=num_warps
    )
    return y


def reference(x, b):
    return x * 2.0 + b


def get_inputs():
    return [torch.randn(8, 48), torch.randn(48)]


def get_holdout_inputs():
    return [[torch.randn(13, 48), torch.randn(48)]]


TUNE = {"BLOCK": [32, 64, 128], "num_warps": [1, 2, 4]}
