"""VGG-style CNN block: two (conv 3x3 + folded-BN affine + ReLU) stages then max-pool 2x2.

Shapes: batch 16, 64 -> 128 channels, 64 x 64 images.
Category: small model (conv stack).
Why it is interesting: two cuDNN convs, each followed by an affine + ReLU
epilogue, and a final pool that Inductor may fuse with the last epilogue;
conv-dominated, so f is moderate (the spec measured 0.38-0.83 for such models).
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_MID, H, W = 16, 64, 128, 64, 64


class ConvAffineRelu(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        # a folded eval-mode BatchNorm; explicit so that no running statistics change
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(1, c_out, 1, 1))
        self.shift = nn.Parameter(0.1 * torch.randn(1, c_out, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) * self.scale + self.shift)


class Model(nn.Module):
    def __init__(self, c_in: int, c_mid: int):
        super().__init__()
        self.stage1 = ConvAffineRelu(c_in, c_mid)
        self.stage2 = ConvAffineRelu(c_mid, c_mid)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.stage2(self.stage1(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, C_IN, H, W)], [torch.randn(2, C_IN, 30, 46)]]


def get_init_inputs():
    return [C_IN, C_MID]
