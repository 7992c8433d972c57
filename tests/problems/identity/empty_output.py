"""An output with no elements (a zero-size slice)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x[:, :0])


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
