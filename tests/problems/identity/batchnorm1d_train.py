"""Batch norm in training mode: batch statistics, running statistics updated every call."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.bn = nn.BatchNorm1d(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.lin(x)))


def get_inputs():
    return [torch.randn(8, 12)]


def get_init_inputs():
    return [12]
