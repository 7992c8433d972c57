"""Conv 3x3 (64 -> 128) + GroupNorm (8 groups) + SiLU, a diffusion U-Net motif.

Category: conv + normalisation + activation.
Why it is interesting: GroupNorm reduces over (channels/groups) x H x W per
sample, a reduction shape unlike LayerNorm's; normalisation and activation
fuse into one Triton kernel after the cuDNN conv.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, C_IN, C_OUT, H, W, GROUPS = 16, 64, 128, 64, 64, 8


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, c_out)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, C_IN, H, W)], [torch.randn(3, C_IN, 30, 50)]]


def get_init_inputs():
    return [C_IN, C_OUT, GROUPS]
