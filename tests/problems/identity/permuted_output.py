"""Channels-last view of a convolution's output (permuted, non-contiguous)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).permute(0, 2, 3, 1)


def get_inputs():
    return [torch.randn(2, 3, 4, 5)]


def get_init_inputs():
    return []
