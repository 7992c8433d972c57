"""A boolean reduction: does any entry of a row exceed one?"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.abs() > 1.0).any(dim=1)


def get_inputs():
    return [torch.randn(8, 4)]


def get_init_inputs():
    return []
