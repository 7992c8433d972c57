"""torch.inference_mode inside forward, and a grad-requiring input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return torch.tanh(self.lin(x))


def get_inputs():
    return [torch.randn(4, 8, requires_grad=True)]


def get_init_inputs():
    return []
