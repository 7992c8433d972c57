"""torch.max over a dim returns a named tuple (values, indices)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.max(x, dim=1)


def get_inputs():
    return [torch.randn(32, 100)]


def get_init_inputs():
    return []
