"""forward takes a gradient with torch.autograd.grad under enable_grad."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = (x.sin() * x).sum()
            (g,) = torch.autograd.grad(y, x)
        return g


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
