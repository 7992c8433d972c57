"""Broken -- never returns."""

import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            time.sleep(0.05)
