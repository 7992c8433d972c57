"""ResNet bottleneck block: 1x1 reduce, 3x3, 1x1 expand, each with a folded-BN affine, plus identity.

Shapes: batch 16, 256 channels (64 in the bottleneck), 56 x 56.
Category: small model (residual conv block).
Why it is interesting: three convs of very different arithmetic intensity
(the 1x1s are GEMMs in disguise) and a residual add + ReLU that fuses into
the last conv's epilogue kernel.
"""

import torch
import torch.nn as nn

BATCH, CHANNELS, BOTTLENECK, H, W = 16, 256, 64, 56, 56


def _affine(channels: int) -> tuple[nn.Parameter, nn.Parameter]:
    scale = nn.Parameter(1.0 + 0.1 * torch.randn(1, channels, 1, 1))
    shift = nn.Parameter(0.1 * torch.randn(1, channels, 1, 1))
    return scale, shift


class Model(nn.Module):
    def __init__(self, channels: int, bottleneck: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, bottleneck, 1, bias=False)
        self.spatial = nn.Conv2d(bottleneck, bottleneck, 3, padding=1, bias=False)
        self.expand = nn.Conv2d(bottleneck, channels, 1, bias=False)
        self.s1, self.b1 = _affine(bottleneck)
        self.s2, self.b2 = _affine(bottleneck)
        self.s3, self.b3 = _affine(channels)

    def forward(self, x):
        y = torch.relu(self.reduce(x) * self.s1 + self.b1)
        y = torch.relu(self.spatial(y) * self.s2 + self.b2)
        y = self.expand(y) * self.s3 + self.b3
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_holdout_inputs():
    return [[torch.randn(1, CHANNELS, H, W)], [torch.randn(2, CHANNELS, 28, 35)]]


def get_init_inputs():
    return [CHANNELS, BOTTLENECK]
