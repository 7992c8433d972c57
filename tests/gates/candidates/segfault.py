"""Broken -- the process dies with SIGSEGV (a crash no Python handler sees)."""

import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return x
