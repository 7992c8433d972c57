"""A None among the outputs, as optional results are returned."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.relu(), None


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
