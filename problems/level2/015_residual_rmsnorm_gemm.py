"""Residual add + RMSNorm + linear projection (1024 -> 4096): a pre-norm block entry.

Category: prologue (pointwise + reduction) + GEMM.
Why it is interesting: the reduction and residual come before the GEMM, so
the search target is the normalisation kernel, and a fused prologue would have
to normalise whole rows before the GEMM's K-loop starts.
"""

import torch
import torch.nn as nn

BATCH, HIDDEN, OUT_FEATURES = 8192, 1024, 4096


class Model(nn.Module):
    def __init__(self, hidden: int, out_features: int, eps: float = 1e-6):
        super().__init__()
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.proj = nn.Linear(hidden, out_features, bias=False)
        self.eps = eps

    def forward(self, x, residual):
        h = x + residual
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return self.proj(h)


def get_inputs():
    return [torch.randn(BATCH, HIDDEN), torch.randn(BATCH, HIDDEN)]


def get_holdout_inputs():
    return [
        [torch.randn(5, HIDDEN), torch.randn(5, HIDDEN)],
        [torch.randn(999, HIDDEN), torch.randn(999, HIDDEN)],
    ]


def get_init_inputs():
    return [HIDDEN, OUT_FEATURES]
