"""Noise shaped like the activation (randn_like) after a linear layer."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(10, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return h + torch.randn_like(h) * h.abs().mean()


def get_inputs():
    return [torch.randn(3, 10)]


def get_init_inputs():
    return []
