"""Tiny multi-head attention block with attention dropout, in training mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return [8, 2]
