"""A tuple of two outputs of different shapes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.exp(), x.sum(dim=0)


def get_inputs():
    return [torch.randn(3, 4)]


def get_init_inputs():
    return []
