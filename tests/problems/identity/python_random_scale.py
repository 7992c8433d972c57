"""A scale drawn from Python's random module inside forward (seeded per call too)."""

import random

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (1.0 + random.random())


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return []
