"""Linear (2048 -> 4096) on 4096 rows + sigmoid + sum over features.

Category: GEMM + activation + reduction.
Why it is interesting: the 64 MiB GEMM output is only needed for a (rows, 1)
sum; a fused epilogue could avoid writing it at all, but the baseline writes
it and reduces it in a second kernel.
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 4096, 2048, 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(10, IN_FEATURES)], [torch.randn(1234, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
