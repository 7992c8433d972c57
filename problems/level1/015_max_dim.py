"""Max (values only) over dim 1 of a (128, 2048, 256) tensor.

Category: exact reduction (order-independent, bit-exact).
Why it is interesting: max is exact, so the baseline's own fp32-vs-fp64 error is
zero and the model-level gate must fall back to its scale-relative check; any
deviation is a bug, not rounding.
"""

import torch
import torch.nn as nn

SHAPE = (128, 2048, 256)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_holdout_inputs():
    return [[torch.randn(16, 2048, 256)], [torch.randn(9, 1001, 255)]]


def get_init_inputs():
    return [1]
