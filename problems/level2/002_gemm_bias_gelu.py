"""Linear layer (2048 -> 8192) on 4096 rows followed by exact (erf) GELU.

Category: GEMM + epilogue (transformer MLP up-projection).
Why it is interesting: the output (128 MiB) is 4x wider than the input, so the
separate GELU kernel reads and writes the whole output again; fusing it into
the GEMM saves that round trip.
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 4096, 2048, 8192


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(64, IN_FEATURES)], [torch.randn(777, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
