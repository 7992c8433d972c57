"""Cheat -- remembers its answer per input tensor object (timing used to repeat one tensor)."""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest


class ModelNew(_Honest):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self._memo: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = id(x)
        if key not in self._memo:
            self._memo[key] = super().forward(x)
        return self._memo[key]
