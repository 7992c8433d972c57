"""A float64 model: inputs and output in double precision."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1) / (1 + x.abs())


def get_inputs():
    return [torch.randn(4, 32, dtype=torch.float64)]


def get_init_inputs():
    return []
