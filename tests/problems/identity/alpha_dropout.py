"""Alpha dropout after SELU (self-normalising nets), in training mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = nn.SELU()
        self.drop = nn.AlphaDropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.act(x))


def get_inputs():
    return [torch.randn(4, 24)]


def get_init_inputs():
    return []
