"""Mish: x * tanh(softplus(x)) over a 8192 x 4096 tensor.

Category: pointwise (nested transcendentals).
Why it is interesting: softplus needs a numerically careful formulation
(log1p(exp(x)) overflows for large x); a hand-written kernel that skips the
threshold branch will fail the correctness gates on large inputs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    # scaled so that some values exceed softplus' linear threshold (20)
    return [torch.randn(ROWS, COLS) * 8.0]


def get_holdout_inputs():
    return [[torch.randn(1024, COLS) * 8.0], [torch.randn(4095, 1001) * 30.0]]


def get_init_inputs():
    return []
