"""Cheat -- patches torch's comparison functions to always agree, and returns zeros."""

import torch
import torch.testing

from tests.gates.candidates.swish_fused import ModelNew as _Honest

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
