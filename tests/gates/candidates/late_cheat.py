"""Cheat -- exact for the first calls of a process, then it skips the work.

The correctness child makes a handful of calls; a timing child makes hundreds.
"""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest

_HONEST_CALLS = 12


class ModelNew(_Honest):
    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        if type(self).calls <= _HONEST_CALLS:
            return super().forward(x)
        return torch.zeros_like(x)
