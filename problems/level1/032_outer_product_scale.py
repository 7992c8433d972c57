"""Outer product with a sigmoid: sigmoid(u[:, None] * v[None, :]) for u (8192,), v (4096,).

Category: broadcast (write bound).
Why it is interesting: 48 KiB of input produces 128 MiB of output, so the
kernel is purely write bound; Inductor might route the product through a
GEMM-like path when it is written as a matmul of rank-1 factors.
"""

import torch
import torch.nn as nn

M, N = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, u, v):
        return torch.sigmoid(torch.outer(u, v))


def get_inputs():
    return [torch.randn(M), torch.randn(N)]


def get_holdout_inputs():
    return [[torch.randn(1000), torch.randn(N)], [torch.randn(M), torch.randn(999)]]


def get_init_inputs():
    return []
