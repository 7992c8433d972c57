"""SiLU written out by hand, mixed with a tanh branch: x * sigmoid(x) + 0.1 * tanh(x).

Category: pointwise chain (two transcendental branches of the same input).
Why it is interesting: the input is read once but feeds two branches; eager
materialises three temporaries, a fused kernel reads x once and writes once.
"""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(x) + 0.1 * torch.tanh(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(2049, COLS)], [torch.randn(ROWS, 3000)]]


def get_init_inputs():
    return []
