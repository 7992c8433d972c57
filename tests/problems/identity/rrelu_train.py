"""Randomised leaky ReLU: random negative slopes in training mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.RReLU(0.1, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x) * 2.0


def get_inputs():
    return [torch.randn(7, 10)]


def get_init_inputs():
    return []
