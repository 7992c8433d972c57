"""Init inputs with a None and a tuple, forward with an optional None input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, shape, bias) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(*shape))
        self.bias = bias

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        y = x @ self.w
        return y if mask is None else y * mask


def get_inputs():
    return [torch.randn(4, 8), None]


def get_init_inputs():
    return [(8, 3), None]
