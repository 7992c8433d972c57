"""An fp16 exp that overflows to inf where float64 stays finite: the baseline's own error."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x * 1000).exp()


def get_inputs():
    return [torch.randn(16, 32).half()]


def get_init_inputs():
    return []
