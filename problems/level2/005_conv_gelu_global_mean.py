"""Conv 3x3 (32 -> 64) + GELU + global average over H and W.

Category: conv + activation + reduction.
Why it is interesting: the conv output (51 MiB) is only needed to produce a
(batch, channels) mean; the GELU and the spatial mean fuse into one reduction
kernel after cuDNN, and the conv output is written and read once each.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, C_IN, C_OUT, H, W = 32, 32, 64, 80, 80


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x):
        y = F.gelu(self.conv(x))
        return y.mean(dim=(2, 3))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, C_IN, H, W)], [torch.randn(4, C_IN, 33, 47)]]


def get_init_inputs():
    return [C_IN, C_OUT]
