"""Channel dropout on a small feature map (whole channels zeroed)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout2d(0.4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x) + 1.0


def get_inputs():
    return [torch.randn(3, 6, 4, 4)]


def get_init_inputs():
    return []
