"""Bin numbers of an fp16 chain's values, many of them within a rounding of a bin edge:
which bin such a value falls in depends on the precision it was computed in."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.sin(x * 30.0) * 2.0
        edges = torch.linspace(-2.0, 2.0, 17, device=x.device, dtype=y.dtype)
        return torch.bucketize(y, edges), torch.searchsorted(edges, y, right=True)


def get_inputs():
    return [torch.rand(128, 64, dtype=torch.float16)]


def get_init_inputs():
    return []
