"""Wrong -- returns zeros of the right shape: right only against a reference of zeros."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
