"""Diagonal matrix times dense matrix: torch.diag(a) @ B with N = 4096.

Category: structured matmul (diagonal).
Why it is interesting: Inductor materialises diag(a) as a dense N x N matrix and
calls a generic O(N^3) GEMM, while the result is just a row scaling,
a[:, None] * B, which is O(N^2) and memory bound: the largest algebraic win
in the suite.
"""

import torch
import torch.nn as nn

N, M = 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.diag(a) @ b


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_holdout_inputs():
    return [
        [torch.randn(1000), torch.randn(1000, 3000)],
        [torch.randn(2048), torch.randn(2048, 2048)],
    ]


def get_init_inputs():
    return []
