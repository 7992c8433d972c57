"""Lower-triangular times lower-triangular: tril(A) @ tril(B), N = 4096.

Category: structured matmul (triangular).
Why it is interesting: the product of two lower-triangular matrices is lower
triangular and C[i, j] only sums k in [j, i]; a kernel can skip the upper
output tiles and the zero K-ranges, about one sixth of the dense FLOPs, while
Inductor runs two masking kernels and a dense GEMM.
"""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(torch.tril(a), torch.tril(b))


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_holdout_inputs():
    return [
        [torch.randn(1000, 1000), torch.randn(1000, 1000)],
        [torch.randn(2500, 2500), torch.randn(2500, 2500)],
    ]


def get_init_inputs():
    return []
