"""Depthwise 3x3 convolution (groups = channels = 128) on (16, 128, 112, 112).

Category: convolution (depthwise, memory bound).
Why it is interesting: nine MACs per output element, so unlike a dense conv
this is bandwidth bound, and cuDNN's depthwise paths are often weaker than a
simple tiled stencil kernel.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, H, W = 16, 128, 112, 112


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, CHANNELS, H, W)], [torch.randn(3, CHANNELS, 57, 33)]]


def get_init_inputs():
    return [CHANNELS]
