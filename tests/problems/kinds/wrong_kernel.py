"""Bad: the file's own kernel does not compute its reference (it forgets the bias)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def launch(x, b):
    y = torch.empty_like(x)
    _scale[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


def reference(x, b):
    return x * 2.0 + b


def get_inputs():
    return [torch.randn(4, 16), torch.randn(16)]
