"""Symmetric times dense: A @ B where A (4096, 4096) is symmetric by construction.

Category: structured matmul (symmetric operand, structure in the data).
Why it is interesting: A == A.T, so a kernel may read A in whichever
orientation gives coalesced loads, or read only one triangle; unlike the
triangular problems the structure is a property of the inputs, so held-out
inputs are symmetric too and a kernel that assumes it stays correct.
"""

import torch
import torch.nn as nn

N, M = 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def _symmetric(n: int) -> torch.Tensor:
    x = torch.randn(n, n)
    return (x + x.T) * 0.5


def get_inputs():
    return [_symmetric(N), torch.randn(N, M)]


def get_holdout_inputs():
    return [[_symmetric(1000), torch.randn(1000, 777)], [_symmetric(2048), torch.randn(2048, 2048)]]


def get_init_inputs():
    return []
