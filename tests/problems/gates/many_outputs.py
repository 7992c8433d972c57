"""Many small outputs of one cheap forward: every call costs the harness a record per output."""

import torch
import torch.nn as nn

OUTPUTS, D = 48, 4


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * self.scale).unbind(0)


def get_init_inputs():
    return [1.0]


def get_inputs():
    return [torch.randn(OUTPUTS, D)]
