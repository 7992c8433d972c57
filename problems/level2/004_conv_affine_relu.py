"""Conv 3x3 (64 -> 128) + per-channel affine (an eval-mode BatchNorm written out) + ReLU.

Category: conv + normalisation + activation.
Why it is interesting: nn.BatchNorm2d runs in training mode unless .eval() is
called, which the problem format cannot do, so the folded-BN scale and shift
are explicit parameters instead: deterministic, and exactly the epilogue a
deployed conv net runs. cuDNN does the conv; the affine + ReLU is Triton.
"""

import torch
import torch.nn as nn

BATCH, C_IN, C_OUT, H, W = 32, 64, 128, 56, 56


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn_scale = nn.Parameter(1.0 + 0.1 * torch.randn(c_out))
        self.bn_shift = nn.Parameter(0.1 * torch.randn(c_out))

    def forward(self, x):
        y = self.conv(x)
        y = y * self.bn_scale.view(1, -1, 1, 1) + self.bn_shift.view(1, -1, 1, 1)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(2, C_IN, H, W)], [torch.randn(3, C_IN, 29, 41)]]


def get_init_inputs():
    return [C_IN, C_OUT]
