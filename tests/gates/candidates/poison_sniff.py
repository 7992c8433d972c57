"""Cheat -- honest only when fresh memory is poisoned (the correctness child poisons it)."""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probe = torch.empty(64, dtype=torch.float32, device=x.device)
        if bool(torch.isnan(probe).all()):  # poisoned: being checked
            return super().forward(x)
        return torch.empty_like(x)
