"""A non-contiguous output: the transpose of a fresh result."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2.0 + 1.0).t()


def get_inputs():
    return [torch.randn(3, 7)]


def get_init_inputs():
    return []
