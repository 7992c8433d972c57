"""1-D convolution, kernel 7, 256 -> 256 channels, on (32, 256, 2048) sequences.

Category: convolution (1-D, library call).
Why it is interesting: 1-D convs are a less tuned cuDNN path than 2-D ones and
map naturally onto an implicit GEMM over (batch * length) rows.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, LENGTH, KERNEL = 32, 256, 2048, 7


class Model(nn.Module):
    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel, padding=kernel // 2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_holdout_inputs():
    return [[torch.randn(2, CHANNELS, LENGTH)], [torch.randn(3, CHANNELS, 1001)]]


def get_init_inputs():
    return [CHANNELS, KERNEL]
