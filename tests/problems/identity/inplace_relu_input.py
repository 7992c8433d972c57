"""In-place ReLU on the input, which is also returned (the output aliases the input)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu_()


def get_inputs():
    return [torch.randn(4, 6)]


def get_init_inputs():
    return []
