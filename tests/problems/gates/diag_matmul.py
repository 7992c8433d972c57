"""diag(a) @ B: Inductor dispatches a generic O(N^3) GEMM for an O(N^2) row scale (docs/method.md#algebraic-wins)."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
N = 32 if SMALL else 4096


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ b


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(N), torch.randn(N, N)]


def get_holdout_inputs():
    m = 48 if SMALL else 3000
    return [[torch.randn(m), torch.randn(m, N)]]
