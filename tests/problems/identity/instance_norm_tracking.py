"""Instance norm that tracks running statistics (updated in training mode)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm = nn.InstanceNorm2d(c, affine=True, track_running_stats=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x).sigmoid()


def get_inputs():
    return [torch.randn(2, 3, 5, 5)]


def get_init_inputs():
    return [3]
