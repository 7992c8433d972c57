"""Broadcast bias, scale and clamp: clamp((x + bias) * scale, -1, 1) with a learned row bias.

Category: pointwise with a broadcast parameter.
Why it is interesting: the bias is a (cols,) parameter broadcast over rows, so a
kernel must index it by column; Inductor lifts it into an explicit kernel
argument, which is why the checker captures real weights.
"""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self, cols: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols))
        self.scale = scale

    def forward(self, x):
        return torch.clamp((x + self.bias) * self.scale, -1.0, 1.0)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(1, COLS)], [torch.randn(3001, COLS)]]


def get_init_inputs():
    return [COLS, 0.7]
