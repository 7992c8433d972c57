"""One tensor returned twice in a tuple (two outputs aliasing each other)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x.exp()
        return y, y


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
