"""An embedding with max_norm: the looked-up rows are renormalised in the weight itself."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16, max_norm=1.0)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.emb(idx).sum(1)


def get_inputs():
    return [torch.randint(0, 50, (4, 6))]


def get_init_inputs():
    return []
