"""ResNet-50-like CNN: bottleneck stages [3, 4, 6, 3], batch 128 at 224x224.

Category: large model (deep residual CNN, issue 31).
Why it is interesting: 53 library convolutions, each followed by a batch norm
over batch statistics -- the forward KernelBench times, its models being in
training mode -- which Inductor turns into a reduction kernel (often split in
two at this batch) and a normalise + ReLU (+ residual add) kernel: well over
100 Triton launches per forward around the library convolutions, so triage's
Amdahl ranking decides what is worth searching. The norms keep no running
statistics, so a forward has no side effects. ``KERNELOPT_SMALL=1`` keeps the
depth (and so the kernel structure) but shrinks widths, batch and resolution
for CPU tests.
"""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_SMALL") == "1"
BATCH, IMAGE, BASE_WIDTH = (2, 64, 8) if SMALL else (128, 224, 64)
BLOCKS = [3, 4, 6, 3]
CLASSES = 10 if SMALL else 1000
EXPANSION = 4


def norm(channels: int) -> nn.BatchNorm2d:
    """Batch statistics on every call, no running buffers to update."""
    return nn.BatchNorm2d(channels, track_running_stats=False)


def conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False)


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * EXPANSION
        self.conv1, self.bn1 = conv(c_in, width, 1), norm(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), norm(width)
        self.conv3, self.bn3 = conv(width, c_out, 1), norm(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(conv(c_in, c_out, 1, stride), norm(c_out))

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
        self.stem_bn = norm(base_width)
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
