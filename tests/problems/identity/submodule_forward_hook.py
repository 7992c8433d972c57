"""A forward hook on a submodule that changes its output."""

import torch
import torch.nn as nn


def _double(module: nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
    return out * 2


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.fc.register_forward_hook(_double)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
