"""A complex-valued output (an FFT)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
