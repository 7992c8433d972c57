"""One input with zero rows, concatenated with a non-empty one."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y]).relu()


def get_inputs():
    return [torch.randn(0, 8), torch.randn(4, 8)]


def get_init_inputs():
    return []
