"""Linear (1024 -> 2048) on 8192 rows followed by LayerNorm over the 2048 outputs.

Category: GEMM + row normalisation.
Why it is interesting: a row-wise reduction epilogue; fusing it into the GEMM
requires one program to own whole output rows (BLOCK_N = 2048), a trade-off
against GEMM efficiency.
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 8192, 1024, 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x):
        return self.norm(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(64, IN_FEATURES)], [torch.randn(1500, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
