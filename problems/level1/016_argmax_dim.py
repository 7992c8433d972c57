"""Argmax over the last dim of a (4096, 8192) matrix, returned as float32 indices.

Category: exact reduction with index output.
Why it is interesting: ties must resolve to the first maximum like PyTorch
does; the cast to float keeps the output in fp32 for the correctness gates
while staying exact (indices < 2^24).
"""

import torch
import torch.nn as nn

ROWS, COLS = 4096, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=-1).to(torch.float32)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    # rounded inputs create many ties, which exercise first-index tie-breaking
    return [[torch.round(torch.randn(512, COLS))], [torch.randn(1000, 3333)]]


def get_init_inputs():
    return []
