"""Residual add, then RMSNorm of the SiLU-gated stream (hidden 2560); returns output and residual.

Shapes: x, residual and gate are 8x2048x2560.
Category: pointwise prologue + row reduction + normalisation (two outputs).
Why it is interesting: the fused add-and-norm of pre-norm blocks meets the
gated RMSNorm of Mamba-2 style layers: the gate multiplies before the squares
are summed, three inputs are read and two rows written per token (the updated
residual stream is returned, so it must be stored although the norm consumes
it). A plain RMSNorm kernel does not fit; one pass per 10 KiB row does.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, TOKENS, HIDDEN = 8, 2048, 2560


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x, residual, gate):
        h = x + residual
        g = h * F.silu(gate)
        y = g * torch.rsqrt(g.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        return y, h


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN) for _ in range(3)]


def get_holdout_inputs():
    return [
        [torch.randn(1, 1000, HIDDEN) for _ in range(3)],
        [torch.randn(2, 37, HIDDEN) for _ in range(3)],
    ]


def get_init_inputs():
    return [HIDDEN]
