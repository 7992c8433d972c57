"""nn.MultiheadAttention with dropout in training mode, attention weights returned too."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, dropout=0.1, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=True)


def get_inputs():
    return [torch.randn(2, 10, 32)]


def get_init_inputs():
    return []
