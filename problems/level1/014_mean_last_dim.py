"""Mean over the last dimension of a (256, 256, 512) tensor.

Category: reduction along the contiguous axis.
Why it is interesting: 64K short rows of 512 elements: the reduction is
cheap, so the kernel is bound by how well it batches many rows per program.
"""

import torch
import torch.nn as nn

SHAPE = (256, 256, 512)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=-1)


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_holdout_inputs():
    return [[torch.randn(64, 256, 512)], [torch.randn(5, 77, 513)]]


def get_init_inputs():
    return []
