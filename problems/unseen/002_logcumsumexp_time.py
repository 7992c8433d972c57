"""Running log-sum-exp along time: logcumsumexp over dim 1 of a (16, 4096, 512) sequence.

Shapes: 16 sequences, 4096 steps, 512 channels (time-major within each sequence).
Category: scan (log-add-exp combine, strided axis).
Why it is interesting: log-space prefix sums keep a causal normaliser, or the
prefix of a gated linear recurrence computed as a parallel scan, from under- or
overflowing. The combine is log(exp(a) + exp(b)) -- an exp and a log1p per step
instead of an add -- and the scanned axis is strided by the 512 channels, so a
kernel scans columns of a matrix, not its rows.
"""

import torch
import torch.nn as nn

BATCH, STEPS, CHANNELS = 16, 4096, 512


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, scores):
        return torch.logcumsumexp(scores, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, STEPS, CHANNELS) * 2.0]


def get_holdout_inputs():
    return [[torch.randn(2, 1000, CHANNELS) * 2.0], [torch.randn(1, 4097, 64) * 2.0]]


def get_init_inputs():
    return [1]
