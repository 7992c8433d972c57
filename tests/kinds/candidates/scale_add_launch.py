"""Honest launch-only candidate for scale_add (the problem's own contract): 2-D blocks."""

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_scale_add(x_ptr, b_ptr, y_ptr, rows, d, BR: tl.constexpr, BD: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.arange(0, BD)[None, :]
    mask = (r < rows) & (c < d)
    x = tl.load(x_ptr + r * d + c, mask=mask)
    b = tl.load(b_ptr + c, mask=c < d)
    tl.store(y_ptr + r * d + c, x * 2.0 + b, mask=mask)


def launch(x, b):
    x = x.contiguous()
    y = torch.empty_like(x)
    d = x.shape[-1]
    rows = x.numel() // d
    _tile_scale_add[(triton.cdiv(rows, 4),)](x, b, y, rows, d, BR=4, BD=triton.next_power_of_2(d))
    return y
