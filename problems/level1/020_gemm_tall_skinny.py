"""Tall-skinny GEMM: (32768, 256) @ (256, 256).

Category: GEMM with a small inner dimension.
Why it is interesting: K = 256 gives little reuse per output tile, so the
problem is closer to memory bound than compute bound; a library GEMM tuned for
square shapes may not pick the best split.
"""

import torch
import torch.nn as nn

M, K, N = 32768, 256, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_holdout_inputs():
    return [[torch.randn(4096, K), torch.randn(K, N)], [torch.randn(10000, K), torch.randn(K, N)]]


def get_init_inputs():
    return []
