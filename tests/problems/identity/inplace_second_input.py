"""Only the second input is mutated (clamped in place) before a reduction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        w.clamp_(-0.5, 0.5)
        return (x @ w).sum(dim=0)


def get_inputs():
    return [torch.randn(4, 6), torch.randn(6, 3)]


def get_init_inputs():
    return []
