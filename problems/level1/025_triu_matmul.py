"""Upper-triangular times dense: triu(A) @ B with A (4096, 4096), B (4096, 2048).

Category: structured matmul (one triangular operand).
Why it is interesting: row i of the output only needs rows k >= i of B, so half
the K-loop is multiplications by zero; skipping them halves the FLOPs.
The mask sits in the graph, so the structure is visible to a compiler but
Inductor still calls a dense GEMM.
"""

import torch
import torch.nn as nn

N, M = 4096, 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.triu(a) @ b


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, M)]


def get_holdout_inputs():
    return [
        [torch.randn(1000, 1000), torch.randn(1000, 500)],
        [torch.randn(3000, 3000), torch.randn(3000, M)],
    ]


def get_init_inputs():
    return []
