"""Residual linear: x + scale * linear(x), 2048 features, 4096 rows.

Category: GEMM + scale + residual add.
Why it is interesting: the residual re-reads the GEMM input in the epilogue;
a fused kernel reads x tiles it already has for the K-loop only if the tiling
lines up, otherwise a second pass over x is unavoidable.
"""

import torch
import torch.nn as nn

BATCH, FEATURES = 4096, 2048


class Model(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x):
        return x + self.scale * self.fc(x)


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(100, FEATURES)], [torch.randn(3000, FEATURES)]]


def get_init_inputs():
    return [FEATURES, 0.5]
