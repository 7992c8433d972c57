"""Convolution, group norm, SiLU (no state)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 8, 3)
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.silu(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 2, 7, 7)]


def get_init_inputs():
    return []
