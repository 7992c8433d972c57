"""Row softmax: a reduction (Inductor emits a persistent-reduction kernel)."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 2048)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(B, D) * 3.0]


def get_holdout_inputs():
    return [[torch.randn(2 * B, D) * 3.0]]
