"""Linear (4096 -> 2048) on 2048 rows, then min with a constant, then subtract a learned vector.

Category: GEMM + clamp-like epilogue with a broadcast parameter.
Why it is interesting: two pointwise ops with a (features,) parameter after an
addmm; a clean control for "epilogue too small to matter" (f near 1).
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 2048, 4096, 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, ceiling: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.offset = nn.Parameter(0.1 * torch.randn(out_features))
        self.ceiling = ceiling

    def forward(self, x):
        y = torch.clamp_max(self.fc(x), self.ceiling)
        return y - self.offset


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(31, IN_FEATURES)], [torch.randn(1024, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.25]
