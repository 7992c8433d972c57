"""Two ConvNeXt-style blocks (depthwise 7x7, channels-last LayerNorm, 4x GELU MLP, layer scale).

Shapes: batch 32, 192 channels, 28x28 (the second stage of a ConvNeXt-T sized network).
Category: small model (modern convolutional block).
Why it is interesting: each block changes layout twice -- NCHW for the
depthwise convolution, NHWC for the LayerNorm and the two pointwise GEMMs --
so the LayerNorm's 192-wide rows are strided in the convolution's output
unless a kernel transposes them; the GEMMs (192 -> 768 -> 192) are small-K and
short, leaving the norm, the GELU, the per-channel layer scale and the layout
changes a large share of the time.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, CHANNELS, SIZE, DEPTH = 32, 192, 28, 2


class ConvNextBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.expand = nn.Linear(dim, 4 * dim)
        self.project = nn.Linear(4 * dim, dim)
        # a trained layer scale, not the 1e-6 it is initialised to
        self.layer_scale = nn.Parameter(0.1 + 0.05 * torch.randn(dim))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.project(F.gelu(self.expand(self.norm(y))))
        return x + (self.layer_scale * y).permute(0, 3, 1, 2)


class Model(nn.Module):
    def __init__(self, dim: int, depth: int):
        super().__init__()
        self.blocks = nn.Sequential(*[ConvNextBlock(dim) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_holdout_inputs():
    return [[torch.randn(2, CHANNELS, SIZE, SIZE)], [torch.randn(3, CHANNELS, 14, 14)]]


def get_init_inputs():
    return [CHANNELS, DEPTH]
