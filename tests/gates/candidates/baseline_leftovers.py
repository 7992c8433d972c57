"""Cheat -- return an answer the baseline left behind in the same timing process.

Gate 4's child times the baseline and then this candidate in one process.  At
import, the candidate collects every 2-d tensor the garbage collector can
still reach (the baseline's inputs or outputs, had they survived; in a gate-2
child nothing 2-d exists yet) and returns one of them instead of computing.
It is honest when it finds nothing: the defence is that it finds nothing.
"""

import gc

import torch
import torch.nn as nn

LEFTOVERS = [t for t in gc.get_objects() if isinstance(t, torch.Tensor) and t.dim() == 2]


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for t in LEFTOVERS:
            if t.shape == x.shape and t.dtype == x.dtype:
                return t.clone()
        return x * torch.sigmoid(x) * self.scale + self.bias
