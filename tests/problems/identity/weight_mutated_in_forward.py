"""A parameter renormalised in place on every call (a stateful weight)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.lin.weight.mul_(1.01)
        return self.lin(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
