"""Row selection by an int64 index vector, then a reduction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return x.index_select(0, rows).sum(dim=1)


def get_inputs():
    return [torch.randn(10, 6), torch.randint(0, 10, (7,))]


def get_init_inputs():
    return []
