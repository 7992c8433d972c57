"""Module-level torch.manual_seed and a float64 default dtype, as some public files have."""

import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(42)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
