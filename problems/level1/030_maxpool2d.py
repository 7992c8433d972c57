"""Max pooling 3x3, stride 2, padding 1 on (32, 64, 112, 112).

Category: pooling (windowed exact reduction).
Why it is interesting: overlapping windows read each input up to four times
unless the kernel reuses loads; max is exact, so the model gate's
scale-relative fallback applies.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, H, W = 32, 64, 112, 112


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_holdout_inputs():
    return [[torch.randn(4, CHANNELS, H, W)], [torch.randn(3, 10, 57, 31)]]


def get_init_inputs():
    return []
