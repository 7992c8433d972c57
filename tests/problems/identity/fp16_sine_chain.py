"""An fp16 chain whose sine amplifies the rounding of its argument: eager rounds x * 50 to fp16
first, a compiler keeps it in fp32, and the two land far apart (float64 sides with the compiler)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.sin(x * 50) * torch.cosh(y) + (x / (y.abs() + 0.01))


def get_inputs():
    return [torch.randn(128, 128).half(), torch.randn(128, 128).half()]


def get_init_inputs():
    return []
