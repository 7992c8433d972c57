"""SwiGLU gate: silu(x @ W1^T) * (x @ W3^T), 1024 -> 2816, on 4096 rows.

Category: two GEMMs joined by a pointwise epilogue.
Why it is interesting: two library GEMMs over the same input feed one
pointwise kernel; a candidate may fuse the two GEMMs into one with
concatenated weights, or fuse the gate into the second GEMM's epilogue.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, HIDDEN, FFN = 4096, 1024, 2816


class Model(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)

    def forward(self, x):
        return F.silu(self.gate(x)) * self.up(x)


def get_inputs():
    return [torch.randn(BATCH, HIDDEN)]


def get_holdout_inputs():
    return [[torch.randn(7, HIDDEN)], [torch.randn(1000, HIDDEN)]]


def get_init_inputs():
    return [HIDDEN, FFN]
