"""A forward that writes its state into a buffer and returns that buffer as an output.

The second output *is* the module's buffer: a later call changes it in place (and the
gates restore the state before every call), so whatever keeps a call's outputs for a
later check must keep their values, not the buffer.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.register_buffer("last", torch.zeros(d))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.last.copy_(x.mean(dim=0))
        return x * 2.0, self.last


def get_inputs():
    return [torch.randn(6, 9)]


def get_init_inputs():
    return [9]
