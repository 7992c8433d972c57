"""Scatter-add of values into bins chosen by int64 indices."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, bins: int) -> None:
        super().__init__()
        self.bins = bins

    def forward(self, values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(values.shape[0], self.bins, device=values.device)
        return out.scatter_add(1, idx, values)


def get_inputs():
    return [torch.randn(3, 12), torch.randint(0, 5, (3, 12))]


def get_init_inputs():
    return [5]
