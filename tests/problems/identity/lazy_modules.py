"""Lazy layers (shapes from the first call) around a batch norm in training mode: the call
that makes them must leave the statistics as built."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.LazyLinear(24)
        self.bn = nn.BatchNorm1d(24)
        self.out = nn.LazyLinear(8)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.inp(x))))


def get_inputs():
    return [torch.randn(16, 12)]


def get_init_inputs():
    return []
