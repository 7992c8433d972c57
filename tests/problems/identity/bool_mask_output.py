"""A boolean output: where the input exceeds a learned-free threshold."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x > 0.25


def get_inputs():
    return [torch.randn(6, 3)]


def get_init_inputs():
    return []
