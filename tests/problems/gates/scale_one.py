"""Multiply by a scale that happens to be 1.0: the answer equals the input, in fresh memory."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 2048)


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def get_init_inputs():
    return [1.0]


def get_inputs():
    return [torch.randn(B, D)]
