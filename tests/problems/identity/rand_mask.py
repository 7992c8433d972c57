"""A uniform draw turned into a keep-mask by hand."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = torch.rand_like(x) > 0.3
        return torch.where(keep, x, torch.zeros_like(x))


def get_inputs():
    return [torch.randn(6, 6)]


def get_init_inputs():
    return []
