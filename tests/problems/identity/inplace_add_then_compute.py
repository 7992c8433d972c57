"""The input is shifted in place, then used: the caller sees the mutation."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1.0)
        return x * y


def get_inputs():
    return [torch.randn(5, 5), torch.randn(5, 5)]


def get_init_inputs():
    return []
