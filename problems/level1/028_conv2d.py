"""3x3 convolution, 64 -> 128 channels, on (32, 64, 64, 64), with bias.

Category: convolution (library call).
Why it is interesting: Inductor hands this to cuDNN; f is ~1.0 in
multi-kernel mode, and an implicit-GEMM Triton kernel in single-kernel mode has
to beat cuDNN's algorithm choice.
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 32, 64, 128, 64, 64


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=True)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, C_IN, H, W)], [torch.randn(5, C_IN, 31, 45)]]


def get_init_inputs():
    return [C_IN, C_OUT, 3]
