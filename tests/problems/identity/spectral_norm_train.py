"""Spectral normalisation in training mode: every call runs a power iteration that
updates the parametrisation's vectors (state the harness restores before each call)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.utils.parametrizations.spectral_norm(nn.Linear(16, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
