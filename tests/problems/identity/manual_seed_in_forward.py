"""forward seeds torch itself before drawing (graph break for Dynamo)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        torch.manual_seed(123)
        return x + torch.randn_like(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
