"""Random column indices drawn with randint, then gathered (int64 drawn inside forward)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.randint(0, x.shape[1], (x.shape[0], 3), device=x.device)
        return x.gather(1, idx)


def get_inputs():
    return [torch.randn(5, 11)]


def get_init_inputs():
    return []
