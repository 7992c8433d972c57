"""An output whose values are ~1e-5: an absolute tolerance of 1e-3 cannot tell it from zero."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 2048)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 1e-5


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(B, D)]


def get_holdout_inputs():
    return [[torch.randn(2 * B, D)]]
