"""RMSNorm written in plain torch ops: x * rsqrt(mean(x^2) + eps) * weight, hidden 2048.

Category: reduction + normalisation.
Why it is interesting: the LLaMA-style normalisation has no mean subtraction,
so one pass over the row suffices; the explicit ops give Inductor a graph
rather than a library call.
"""

import torch
import torch.nn as nn

TOKENS, HIDDEN = 16384, 2048


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_holdout_inputs():
    return [[torch.randn(100, HIDDEN)], [torch.randn(5000, HIDDEN) * 100.0]]


def get_init_inputs():
    return [HIDDEN]
