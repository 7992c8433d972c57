"""A threshold and rounded integers of an fp16 chain whose sine amplifies the rounding of its
argument: eager's rounding moves some across, a compiler's fp32 chain sides with float64."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = torch.sin(x * 50)
        return y, y > 0.5, (y * 8).round().to(torch.int32)


def get_inputs():
    return [torch.randn(256, 64).half()]


def get_init_inputs():
    return []
