"""Relu chain: relu(relu(2x + 1) * 0.5 - 0.25) over a 8192 x 4096 tensor.

Category: pointwise chain.
Why it is interesting: five elementwise ops that eager PyTorch runs as five
kernels and Inductor fuses into one memory-bound kernel; the compiled baseline
already runs at copy bandwidth, so this is a control problem where an honest
optimiser should mostly report "matched".
"""

import torch
import torch.nn as nn

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.relu(x * 2.0 + 1.0)
        return torch.relu(y * 0.5 - 0.25)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    # an odd column count exercises the masking of the last tile
    return [[torch.randn(1000, COLS)], [torch.randn(ROWS // 2, COLS + 1)]]


def get_init_inputs():
    return []
