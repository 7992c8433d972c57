"""One linear layer applied twice (weights shared between the two uses)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.second = self.lin  # the same module under two names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.lin(x)))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
