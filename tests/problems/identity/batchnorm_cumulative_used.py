"""Batch norm whose running statistics feed the output: only a restored state agrees."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d, momentum=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(x)
        return y + self.bn.running_mean + self.bn.num_batches_tracked.float()


def get_inputs():
    return [torch.randn(6, 5)]


def get_init_inputs():
    return [5]
