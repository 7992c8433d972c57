"""Tiny image classifier: conv stem (stride 2) + two conv/ReLU stages + global pool + linear head.

Shapes: batch 64, 3 x 128 x 128 images, 32/64/128 channels, 1000 classes.
Category: small model (end-to-end CNN).
Why it is interesting: a 3-channel stem conv (a poor fit for cuDNN's fast
paths), strided convs, a global mean reduction and a GEMM head: every kind of
kernel in one short graph.
"""

import torch
import torch.nn as nn

BATCH, IMAGE, CLASSES = 64, 128, 1000


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(128, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_holdout_inputs():
    return [[torch.randn(1, 3, IMAGE, IMAGE)], [torch.randn(3, 3, 97, 131)]]


def get_init_inputs():
    return [CLASSES]
