"""Conv 3x3 (48 -> 96, no bias) + learned per-channel bias + clamp to [0, 6] + scale by 1/6.

Category: conv + pointwise epilogue (hard-sigmoid-like).
Why it is interesting: a multi-op epilogue on a conv output of 96 channels, a
non-power-of-two channel count that stresses block-size choices.
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 32, 48, 96, 64, 64


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1))

    def forward(self, x):
        y = self.conv(x) + self.bias
        return torch.clamp(y, 0.0, 6.0) / 6.0


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, C_IN, H, W)], [torch.randn(5, C_IN, 21, 37)]]


def get_init_inputs():
    return [C_IN, C_OUT]
