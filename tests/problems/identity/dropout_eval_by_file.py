"""Dropout switched off by the file's own mode: evaluated in eval mode."""

import torch
import torch.nn as nn

KERNELOPT_MODE = "eval"


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x).cumsum(dim=1)


def get_inputs():
    return [torch.randn(5, 9)]


def get_init_inputs():
    return []
