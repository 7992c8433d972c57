"""A linear layer on bf16 inputs with bf16 weights (bf16 output)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 8).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def get_inputs():
    return [torch.randn(4, 16).to(torch.bfloat16)]


def get_init_inputs():
    return []
