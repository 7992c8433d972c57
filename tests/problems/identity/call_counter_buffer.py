"""A buffer that counts calls and scales the output: stateful, restored before every call."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * self.calls


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
