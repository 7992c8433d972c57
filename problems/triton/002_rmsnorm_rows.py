"""Row-wise RMSNorm over 8192 x 4096 float32: one program per row, launched with one warp.

A standalone Triton problem (see the README, "Standalone Triton and Helion
kernels").  Each program reduces a 4096-wide row; ``num_warps = 1`` (the
default of ``launch``) leaves most of an SM idle, which the built-in
proposer's launch search can find.  Held-out shapes include a width that is
not a power of two.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x * inv * w, mask=mask)


def launch(x, w, *, num_warps: int = 1):
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    rmsnorm_kernel[(rows,)](x, w, out, cols, EPS, BLOCK=block, num_warps=num_warps)
    return out


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(4096)]


def get_holdout_inputs():
    return [
        [torch.randn(100, 4096), torch.randn(4096)],
        [torch.randn(33, 1000), torch.randn(1000)],
    ]
