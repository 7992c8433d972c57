"""A dict of tensors as the output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        return {"sum": x.sum(dim=1), "max": x.amax(dim=1)}


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
