"""Batched diagonal matmul: diag_embed(d) @ X with d (16, 1024), X (16, 1024, 1024).

Category: structured matmul (batched diagonal).
Why it is interesting: diag_embed builds 16 dense 1024 x 1024 matrices (64 MiB
of mostly zeros) and bmm multiplies them in O(B N^3); the same result is
d[..., None] * X, a broadcast multiply.
"""

import torch
import torch.nn as nn

BATCH, N, M = 16, 1024, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, d, x):
        return torch.matmul(torch.diag_embed(d), x)


def get_inputs():
    return [torch.randn(BATCH, N), torch.randn(BATCH, N, M)]


def get_holdout_inputs():
    return [
        [torch.randn(3, 500), torch.randn(3, 500, 700)],
        [torch.randn(32, 512), torch.randn(32, 512, 512)],
    ]


def get_init_inputs():
    return []
