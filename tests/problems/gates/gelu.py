"""Exact (erf) GELU on a large activation tensor."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 2048)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(B, D) * 2.0]


def get_holdout_inputs():
    return [[torch.randn(2 * B, D) * 2.0]]
