"""An fp16 running average updated from a chain whose sine amplifies the rounding of its argument."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("avg", torch.zeros(128, dtype=torch.float16))

    def forward(self, x):
        self.avg.mul_(0.5).add_(torch.sin(x * 50).sum(0) * 0.5)
        return x * 2


def get_inputs():
    return [torch.randn(64, 128).half()]


def get_init_inputs():
    return []
