"""Plain fp32 GEMM: the reference runs with TF32 disabled."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
M, K, N = (32, 64, 32) if SMALL else (2048, 2048, 2048)


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_holdout_inputs():
    return [[torch.randn(2 * M, K), torch.randn(K, N)]]
