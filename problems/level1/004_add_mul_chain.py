"""Three-input arithmetic chain: (a + b) * c - a * 0.5 + b * c.

Category: pointwise chain (multi-input).
Why it is interesting: three 16M-element inputs and one output, so the kernel
moves four tensors; the arithmetic is trivial and the only question is whether
each input is read exactly once.
"""

import torch
import torch.nn as nn

ROWS, COLS = 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return (a + b) * c - a * 0.5 + b * c


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    shape = (1500, 999)
    return [[torch.randn(*shape), torch.randn(*shape), torch.randn(*shape)]]


def get_init_inputs():
    return []
