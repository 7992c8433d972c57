"""A Python float and int among the forward inputs (some suites pass them this way)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, scale: float, dim: int) -> torch.Tensor:
        return torch.softmax(x * scale, dim=dim)


def get_inputs():
    return [torch.randn(4, 8), 0.5, 1]


def get_init_inputs():
    return []
