"""Noise from a generator the model keeps: seeded with torch's before every call, as its state."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.g = torch.Generator().manual_seed(7)

    def forward(self, x):
        # the generator lives on the CPU, as a model's own usually does: drawn there, moved
        return x + torch.randn(x.shape, generator=self.g).to(x.device)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
