"""Batched matmul: (64, 512, 1024) @ (64, 1024, 512).

Category: batched GEMM (library call).
Why it is interesting: 64 independent medium GEMMs; cuBLAS' strided-batched
kernel is the baseline; a Triton kernel must tile the batch dim into the grid.
"""

import torch
import torch.nn as nn

BATCH, M, K, N = 64, 512, 1024, 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_holdout_inputs():
    return [
        [torch.randn(3, M, K), torch.randn(3, K, N)],
        [torch.randn(16, 100, 300), torch.randn(16, 300, 200)],
    ]


def get_init_inputs():
    return []
