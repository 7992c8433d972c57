"""Row-wise RMSNorm over 8192 x 4096 float32 as a Helion kernel.

A Helion kernel problem (see the README, "Standalone Triton and Helion
kernels"; needs ``pip install 'kernelopt[helion]'``).  The baseline is this
kernel after Helion's own autotuning at ``AUTOTUNE_EFFORT`` ("quick": a few
minutes on an H200); the built-in proposer then walks the block sizes, warps
and stages around the autotuned config, and an LLM proposer may rewrite the
Helion source or write Triton instead.
"""

import helion
import helion.language as hl
import torch

AUTOTUNE_EFFORT = "quick"


@helion.kernel(static_shapes=True)
def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, _ = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :]
        inv = 1.0 / torch.sqrt(torch.mean(row * row, dim=-1) + 1e-6)
        out[tile_m, :] = row * inv[:, None] * w[None, :]
    return out


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w


def get_inputs():
    return [torch.randn(8192, 4096), torch.randn(4096)]


def get_holdout_inputs():
    return [
        [torch.randn(100, 4096), torch.randn(4096)],
        [torch.randn(33, 1000), torch.randn(1000)],
    ]
