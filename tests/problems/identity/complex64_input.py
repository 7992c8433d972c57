"""A complex64 input whose real-valued result is returned."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, z):
        return (z * z.conj()).real


def get_inputs():
    return [torch.randn(16, 32, dtype=torch.complex64)]


def get_init_inputs():
    return []
