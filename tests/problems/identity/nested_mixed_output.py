"""Nested output of mixed dtypes: (values, [indices, mask])."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        values, indices = x.topk(3, dim=1)
        return values, [indices, values > 0]


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
