"""Keyword-only and defaulted arguments in __init__ and forward; get_inputs gives fewer."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 1, *, eps: float = 1e-5):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x, scale=None, *, shift: float = 0.0):
        y = x / (x.norm(dim=self.dim, keepdim=True) + self.eps)
        return y if scale is None else y * scale + shift


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [1]
