"""Inclusive prefix sum along dim 1 of a (256, 32768) matrix.

Category: scan.
Why it is interesting: a scan is neither pointwise nor a reduction; Triton has
tl.associative_scan, and a long row needs a blocked scan with carries.
Accumulation order changes the rounding, which the model-level gate measures.
"""

import torch
import torch.nn as nn

ROWS, COLS = 256, 32768


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(32, COLS)], [torch.randn(100, 10007)]]


def get_init_inputs():
    return [1]
