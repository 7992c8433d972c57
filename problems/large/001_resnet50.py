"""ResNet-50-like CNN: bottleneck stages [3, 4, 6, 3], batch 128 at 224x224.

Category: large model (deep residual CNN, issue 31).
Why it is interesting: 53 library convolutions, each followed by a folded-BN
affine (+ ReLU, + residual add) that Inductor turns into its own Triton
kernel, plus pooling: well over 100 kernel launches per forward with a high
library fraction, so triage's Amdahl ranking decides what is worth searching.
BatchNorm is written out as a per-channel affine (eval-mode BN folded), as in
the rest of the suite. ``KERNELOPT_SMALL=1`` keeps the depth (and so the
kernel structure) but shrinks widths, batch and resolution for CPU tests.
"""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_SMALL") == "1"
BATCH, IMAGE, BASE_WIDTH = (2, 32, 8) if SMALL else (128, 224, 64)
BLOCKS = [3, 4, 6, 3]
CLASSES = 10 if SMALL else 1000
EXPANSION = 4


class Affine(nn.Module):
    """Eval-mode BatchNorm folded into a per-channel scale and shift."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.shift = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x):
        return x * self.scale[None, :, None, None] + self.shift[None, :, None, None]


def conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False)


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * EXPANSION
        self.conv1, self.bn1 = conv(c_in, width, 1), Affine(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), Affine(width)
        self.conv3, self.bn3 = conv(width, c_out, 1), Affine(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(conv(c_in, c_out, 1, stride), Affine(c_out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        skip = x if self.down is None else self.down(x)
        return torch.relu(y + skip)


class Model(nn.Module):
    def __init__(self, base_width: int, blocks: list[int], classes: int):
        super().__init__()
        self.stem = conv(3, base_width, 7, stride=2)
        self.stem_bn = Affine(base_width)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        layers: list[nn.Module] = []
        c_in = base_width
        for stage, count in enumerate(blocks):
            width = base_width * 2**stage
            for i in range(count):
                layers.append(Bottleneck(c_in, width, 2 if (i == 0 and stage > 0) else 1))
                c_in = width * EXPANSION
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.stem_bn(self.stem(x))))
        x = self.layers(x)
        return self.head(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_holdout_inputs():
    return [[torch.randn(1, 3, IMAGE, IMAGE)], [torch.randn(3, 3, IMAGE + 16, IMAGE * 3 // 4)]]


def get_init_inputs():
    return [BASE_WIDTH, BLOCKS, CLASSES]
