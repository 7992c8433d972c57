"""Row softmax over a 4096 x 8192 matrix.

Category: reduction (two-pass: max, then sum of exponentials).
Why it is interesting: each row (32 KiB) fits in shared memory / registers, so
an online-softmax kernel can read the input once; Inductor's persistent or
looped reduction is the baseline to beat.
"""

import torch
import torch.nn as nn

ROWS, COLS = 4096, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 4.0]


def get_holdout_inputs():
    return [[torch.randn(1000, COLS) * 4.0], [torch.randn(ROWS, 5000) * 4.0]]


def get_init_inputs():
    return []
