"""Mean squared error between two (8192, 4096) tensors, reduced to a scalar.

Category: full reduction to a scalar.
Why it is interesting: a reduction over 32M elements to one value needs a
split (multi-program) reduction and a second stage or atomics; atomics make
the rounding order non-deterministic, which the model gate tolerates only
within rho <= 10.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, COLS = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return F.mse_loss(pred, target, reduction="mean")


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_holdout_inputs():
    return [[torch.randn(1000, 777), torch.randn(1000, 777)]]


def get_init_inputs():
    return []
