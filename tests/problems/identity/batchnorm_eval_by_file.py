"""Batch norm evaluated in eval mode (the file says so): running statistics used."""

import torch
import torch.nn as nn

KERNELOPT_MODE = "eval"


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1.0, 1.0)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(4, 10)]


def get_init_inputs():
    return [10]
