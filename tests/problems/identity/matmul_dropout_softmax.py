"""Matmul, dropout, softmax: the pattern that failed an identity candidate before seeding."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.drop(a @ b), dim=-1)


def get_inputs():
    return [torch.randn(8, 12), torch.randn(12, 20)]


def get_init_inputs():
    return [0.3]
