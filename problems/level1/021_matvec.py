"""Matrix-vector product: (8192, 8192) @ (8192, 1).

Category: GEMV (memory bound).
Why it is interesting: 256 MiB of matrix read once for 16K FLOPs per row; the
only thing that matters is streaming the matrix at full bandwidth.
"""

import torch
import torch.nn as nn

M, K = 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, v):
        return torch.matmul(a, v)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_holdout_inputs():
    return [[torch.randn(1000, K), torch.randn(K, 1)], [torch.randn(M, 3000), torch.randn(3000, 1)]]


def get_init_inputs():
    return []
