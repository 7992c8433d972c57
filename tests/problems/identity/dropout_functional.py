"""Functional dropout with training=True spelled out, whatever the module's mode."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x * 3.0, p=0.25, training=True)


def get_inputs():
    return [torch.randn(4, 32)]


def get_init_inputs():
    return []
