"""Hardswish over a 4-D activation tensor (32, 64, 128, 128).

Category: pointwise (piecewise polynomial activation).
Why it is interesting: a clamp, a multiply and a divide per element on an NCHW
tensor; the kernel should flatten the tensor and ignore the 4-D shape.
"""

import torch
import torch.nn as nn

SHAPE = (32, 64, 128, 128)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(x * 3.0)


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_holdout_inputs():
    return [[torch.randn(8, 64, 128, 128)], [torch.randn(3, 17, 65, 63)]]


def get_init_inputs():
    return []
