"""A branch on a tensor's value inside forward (a graph break for the compiler)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() > 0:
            return x.relu()
        return x.neg().relu()


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
