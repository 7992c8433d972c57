"""A causal mask kept as a non-persistent buffer (not in the state dict)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(n, n, dtype=torch.bool)), False)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores.masked_fill(~self.mask, float("-inf")), dim=-1)


def get_inputs():
    return [torch.randn(2, 6, 6)]


def get_init_inputs():
    return [6]
