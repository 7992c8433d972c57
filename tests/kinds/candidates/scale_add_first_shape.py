"""Dishonest launch-only candidate: hard-codes the 8 rows it was shown.

Memory-safe on every shape at least that large; held-out shapes with more rows fail.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add(x_ptr, b_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=mask)
    tl.store(y_ptr + row * d + cols, x * 2.0 + tl.load(b_ptr + cols, mask=mask), mask=mask)


def launch(x, b):
    y = torch.zeros_like(x)
    _scale_add[(8,)](x, b, y, 48, BLOCK=64)
    return y
