"""Pointwise chain: y = x * sigmoid(x) * scale + bias (Inductor fuses it into one kernel).

Sizes shrink under KERNELOPT_GATES_SMALL=1 so CPU tests can run the Triton interpreter.
"""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 2048)


class Model(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias


def get_init_inputs():
    return [D, 1.5]


def get_inputs():
    return [torch.randn(B, D)]


def get_holdout_inputs():
    return [[torch.randn(2 * B, D)]]
