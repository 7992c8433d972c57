"""Gaussian noise drawn inside forward with torch.randn (on the input's device: drawn on the
CPU, the problem itself mixes devices on a GPU, which the gates say in one line)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.5 * torch.randn(x.shape, device=x.device)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
