"""A deep residual stack: 32 x (x <- x + 0.1 * tanh(linear(x))).

Depth is what V_model is for: a per-stage error compounds ~sqrt(depth) when
it is honest rounding and linearly when it is a bias.  The residual stream
carries a large DC component (inputs ~ 40 + N(0, 1), like an un-normalised
stream), so a +5e-4 per-stage bias stays inside the per-element 1e-3
tolerance of gate 2 at the output and only the float64 rule exposes it.
"""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 32) if SMALL else (2048, 1024)
DEPTH = 32


class Model(nn.Module):
    def __init__(self, d: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + 0.1 * torch.tanh(layer(x))
        return x


def get_init_inputs():
    return [D, DEPTH]


def get_inputs():
    return [torch.randn(B, D) + 40.0]


def get_holdout_inputs():
    return [[torch.randn(2 * B, D) + 40.0]]
