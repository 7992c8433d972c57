"""Transpose plus add: x.T + y for x (4096, 8192) and y (8192, 4096).

Category: layout change (transpose) fused with a pointwise op.
Why it is interesting: one operand is read with a large stride; a tiled kernel
that stages tiles through shared memory keeps both reads coalesced.
"""

import torch
import torch.nn as nn

M, N = 4096, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x.transpose(0, 1) + y


def get_inputs():
    return [torch.randn(M, N), torch.randn(N, M)]


def get_holdout_inputs():
    return [[torch.randn(1000, 3001), torch.randn(3001, 1000)]]


def get_init_inputs():
    return []
