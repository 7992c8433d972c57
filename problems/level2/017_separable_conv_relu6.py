"""Depthwise 3x3 + pointwise 1x1 (96 -> 192) + ReLU6: a MobileNet separable conv.

Category: two convs + activation.
Why it is interesting: the depthwise conv is bandwidth bound and the 1x1 conv
is a GEMM in disguise; a candidate may fuse the depthwise stencil into the
1x1 GEMM's prologue, which cuDNN cannot do.
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 32, 96, 192, 56, 56


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.depthwise = nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False)
        self.pointwise = nn.Conv2d(c_in, c_out, 1)
        self.act = nn.ReLU6()

    def forward(self, x):
        return self.act(self.pointwise(self.depthwise(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, C_IN, H, W)], [torch.randn(3, C_IN, 27, 41)]]


def get_init_inputs():
    return [C_IN, C_OUT]
