"""Plain square GEMM: C = A @ B with A, B of shape (4096, 4096).

Category: GEMM (library call).
Why it is interesting: Inductor dispatches cuBLAS (or its own template under
max-autotune); the library fraction is ~1.0, so in multi-kernel mode this is a
pure Amdahl control; in single-kernel mode only TF32 or a better tile config
could pay, and the model gate must judge the TF32 rounding.
"""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_holdout_inputs():
    return [
        [torch.randn(333, N), torch.randn(N, N)],
        [torch.randn(1000, 1000), torch.randn(1000, 2000)],
    ]


def get_init_inputs():
    return []
