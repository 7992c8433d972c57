"""Outputs whose shape depends on the data: torch.unique with counts."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.unique(x, return_counts=True)


def get_inputs():
    return [torch.randint(0, 20, (1000,))]


def get_init_inputs():
    return []
