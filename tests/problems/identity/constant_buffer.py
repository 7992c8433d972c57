"""A registered constant buffer (a fixed window) multiplied into the input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.window


def get_inputs():
    return [torch.randn(3, 16)]


def get_init_inputs():
    return [16]
