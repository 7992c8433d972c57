"""A tiny KernelBench-format problem for CPU tests of the capture pipeline.

Linear + a registered buffer + relu: parameters, a buffer and an input all
reach the compiled graph as flat arguments, so their roles can be checked.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, width))

    def forward(self, x):
        return torch.relu(self.fc(x) + self.shift) * 2.0


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
