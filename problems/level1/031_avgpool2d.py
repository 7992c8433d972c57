"""Average pooling 4x4, stride 4 on (32, 128, 128, 128).

Category: pooling (non-overlapping windowed mean).
Why it is interesting: non-overlapping windows make it a reshape plus a small
reduction; the 16x smaller output means the kernel is read bound.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, H, W = 32, 128, 128, 128


class Model(nn.Module):
    def __init__(self, kernel: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel, stride=kernel)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, CHANNELS, H, W)], [torch.randn(3, 7, 60, 36)]]


def get_init_inputs():
    return [4]
