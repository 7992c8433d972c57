"""Outputs that are the model's own parameter and the caller's input, returned as they are.

Nothing is computed for two of the three outputs: the compiled graph hands back the
parameter and the input tensor themselves, so a check that compares outputs must not
count on getting fresh tensors (or on being free to change what it got).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d**0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return x @ self.w, self.w, x


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
