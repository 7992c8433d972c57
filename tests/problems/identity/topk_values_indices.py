"""topk's values and int64 indices as a tuple."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        v, i = torch.topk(x, 5, dim=-1)
        return v, i


def get_inputs():
    return [torch.randn(32, 100)]


def get_init_inputs():
    return []
