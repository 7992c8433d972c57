"""Linear then dropout, in training mode as constructed: a new mask every call."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x))


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return [16]
