"""Bad: the reference draws fresh noise on every call, so two runs never agree."""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch(x):
    out = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def reference(x):
    return x + 1e-3 * torch.randn_like(x)


def get_inputs():
    return [torch.randn(64)]
