"""Cheat -- remembers its answer per input tensor and version counter.

It aims to gain where the timing loop calls it again on an unchanged tensor.  It is
not even correct: a new tensor can reuse a freed one's ``id`` at version 0, and then
the memo returns the old answer.  Either way it must never be faster than honest.
"""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest


class ModelNew(_Honest):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self._memo: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (id(x), x._version)
        if key not in self._memo:
            if len(self._memo) > 8:
                self._memo.clear()
            self._memo[key] = super().forward(x)
        return self._memo[key]
