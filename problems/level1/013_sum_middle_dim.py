"""Sum over the middle dimension of a (64, 4096, 128) tensor, keepdim.

Category: reduction along a strided (non-innermost) axis.
Why it is interesting: the reduced axis has stride 128, so a naive one-row-
per-program kernel reads uncoalesced memory; the good layout reduces across
programs that each own a slab of the contiguous inner dim.
"""

import torch
import torch.nn as nn

BATCH, LENGTH, INNER = 64, 4096, 128


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, LENGTH, INNER)]


def get_holdout_inputs():
    return [[torch.randn(3, LENGTH, INNER)], [torch.randn(16, 1000, 129)]]


def get_init_inputs():
    return [1]
