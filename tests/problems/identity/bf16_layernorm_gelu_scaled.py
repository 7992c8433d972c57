"""A bf16 layer norm, then a scale, a shift and GELU: several bf16 roundings eager makes and a
fused kernel does not."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(256).to(torch.bfloat16)

    def forward(self, x):
        return torch.nn.functional.gelu(self.ln(x) * 3.0 + 1.0)


def get_inputs():
    return [torch.randn(64, 256).bfloat16()]


def get_init_inputs():
    return []
