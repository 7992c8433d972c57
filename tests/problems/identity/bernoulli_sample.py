"""Stochastic binary units: a Bernoulli draw from sigmoid probabilities."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bernoulli(torch.sigmoid(x))


def get_inputs():
    return [torch.randn(4, 7)]


def get_init_inputs():
    return []
