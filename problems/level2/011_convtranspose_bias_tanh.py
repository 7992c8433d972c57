"""Transposed conv 4x4 stride 2 (128 -> 64), upsampling 32x32 to 64x64, + extra bias + tanh.

Category: transposed conv + epilogue (decoder / generator motif).
Why it is interesting: transposed convolutions are a weaker cuDNN path than
forward convs, and the learned extra bias plus tanh is a typical fusable tail.
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 32, 128, 64, 32, 32


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1)
        self.extra_bias = nn.Parameter(0.1 * torch.randn(1, c_out, 1, 1))

    def forward(self, x):
        return torch.tanh(self.deconv(x) + self.extra_bias)


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, C_IN, H, W)], [torch.randn(3, C_IN, 17, 23)]]


def get_init_inputs():
    return [C_IN, C_OUT]
