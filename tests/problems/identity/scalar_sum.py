"""A 0-d output: the sum of squares."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * x).sum()


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
