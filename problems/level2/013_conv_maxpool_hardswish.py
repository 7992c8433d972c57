"""Conv 3x3 (32 -> 64) + max-pool 2x2 + hardswish.

Category: conv + pooling + activation.
Why it is interesting: the pool shrinks the data 4x, so pooling and the
activation fuse into one read of the conv output. Hardswish is not monotone
(it dips to -0.375 at x = -1.5), so applying it before the max is NOT
equivalent: a candidate that swaps the two is wrong on some windows and the
gates must catch it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, C_IN, C_OUT, H, W = 32, 32, 64, 96, 96


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return F.hardswish(self.pool(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, C_IN, H, W)], [torch.randn(3, C_IN, 38, 62)]]


def get_init_inputs():
    return [C_IN, C_OUT]
