"""Linear layer (4096 -> 4096, with bias) on 2048 rows, followed by ReLU.

Category: GEMM + epilogue.
Why it is interesting: Inductor calls addmm (cuBLAS) and fuses nothing into
it, then runs a small ReLU kernel; f is ~0.99, so multi-kernel mode has
almost nothing to gain (the Amdahl ceiling), a fused epilogue GEMM is the only
route to a win.
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 2048, 4096, 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(128, IN_FEATURES)], [torch.randn(1000, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
