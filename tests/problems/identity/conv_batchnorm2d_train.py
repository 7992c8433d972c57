"""Convolution then 2-d batch norm in training mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def get_inputs():
    return [torch.randn(2, 3, 6, 6)]


def get_init_inputs():
    return [3, 4]
