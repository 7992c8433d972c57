"""Layer norm then exact GELU (stateless, mode-independent)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.norm(x))


def get_inputs():
    return [torch.randn(4, 3, 10)]


def get_init_inputs():
    return [10]
