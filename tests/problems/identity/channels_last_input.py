"""A convolution whose input comes in channels-last memory order (strides, not shape, differ)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 8, 16, 16).to(memory_format=torch.channels_last)]


def get_init_inputs():
    return []
