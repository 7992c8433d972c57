"""An input that is the transpose of a fresh tensor: non-contiguous from get_inputs()."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.exp() + b


def get_inputs():
    return [torch.randn(32, 16).t(), torch.randn(16, 32)]


def get_init_inputs():
    return []
