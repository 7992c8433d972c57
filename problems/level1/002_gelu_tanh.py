"""GELU with the tanh approximation over a 8192 x 4096 tensor.

Category: pointwise (transcendental).
Why it is interesting: the tanh approximation costs a handful of FMAs plus one
tanh per element, still memory bound on an H200; a good kernel keeps it at
copy bandwidth, a careless one becomes SFU bound.
"""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(777, COLS)], [torch.randn(ROWS, 1023)]]


def get_init_inputs():
    return []
