"""Leaky ReLU with slope 0.05 over a 16384 x 2048 tensor.

Category: pointwise (single op).
Why it is interesting: one compare-and-select per element; the purest
bandwidth test in the suite, where any claimed speedup beyond ~1.05x over the
compiled baseline should be treated as suspicious by the perf gate.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, COLS = 16384, 2048


class Model(nn.Module):
    def __init__(self, negative_slope: float = 0.05):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(4096, 2048)], [torch.randn(333, 4097)]]


def get_init_inputs():
    return [0.05]
