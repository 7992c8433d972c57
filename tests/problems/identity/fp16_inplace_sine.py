"""An fp16 input changed in place by a chain whose sine amplifies the rounding of its argument."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        x.mul_(50).sin_()
        return x + 1


def get_inputs():
    return [torch.randn(128, 128).half()]


def get_init_inputs():
    return []
