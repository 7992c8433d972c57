"""A list of three activations of one input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [torch.relu(x), torch.sigmoid(x), torch.tanh(x)]


def get_inputs():
    return [torch.randn(2, 9)]


def get_init_inputs():
    return []
