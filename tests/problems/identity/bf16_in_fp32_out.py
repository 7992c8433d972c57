"""bf16 inputs widened to float32 for a softmax (mixed dtypes across the call)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.float(), dim=-1)


def get_inputs():
    return [torch.randn(3, 12).to(torch.bfloat16)]


def get_init_inputs():
    return []
