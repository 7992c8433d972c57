"""A problem in float64 throughout, with a boolean mask as its second input.

The float64 gate has no wider type to move to here, and the mask must reach the
candidate as booleans (not cast to the floating type of the other input).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d).double()

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.proj(x)).masked_fill(~keep, 0.0)
        return h.sum(dim=1) / keep.sum(dim=1).clamp(min=1)


def get_inputs():
    return [torch.randn(8, 24, dtype=torch.float64), torch.rand(8, 24) > 0.3]


def get_init_inputs():
    return [24]
