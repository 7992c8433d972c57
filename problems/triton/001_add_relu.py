"""relu(x + y) over 8192 x 4096 float32: a pointwise Triton kernel, launched with a small block.

A standalone Triton problem (see the README, "Standalone Triton and Helion
kernels").  ``launch`` is the baseline; its keyword-only parameters BLOCK and
num_warps are its launch configuration, which the built-in proposer searches
(the default BLOCK = 128 gives each program little work: there is room).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


def launch(x, y, *, BLOCK: int = 128, num_warps: int = 4):
    x = x.contiguous()
    y = y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    add_relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps)
    return out


def reference(x, y):
    return torch.relu(x + y)


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(8192, 4096)]


def get_holdout_inputs():
    return [
        [torch.randn(1000, 4096), torch.randn(1000, 4096)],
        [torch.randn(37, 129), torch.randn(37, 129)],
    ]


TUNE = {"BLOCK": [128, 256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8, 16]}
