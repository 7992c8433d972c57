"""Log-softmax over very wide rows: 512 x 65536 (a vocabulary-sized axis).

Category: reduction (wide rows, few of them).
Why it is interesting: only 512 rows, so one program per row leaves an H200's
132 SMs poorly fed unless the row itself is split; the 256 KiB row does not fit
on chip, forcing a looped or split reduction.
"""

import torch
import torch.nn as nn

ROWS, VOCAB = 512, 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        return torch.log_softmax(logits, dim=1)


def get_inputs():
    return [torch.randn(ROWS, VOCAB) * 3.0]


def get_holdout_inputs():
    return [[torch.randn(64, VOCAB) * 3.0], [torch.randn(ROWS, 50257) * 3.0]]


def get_init_inputs():
    return []
