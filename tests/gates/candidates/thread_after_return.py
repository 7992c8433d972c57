"""Cheat -- returns an unwritten output and fills it from a thread after forward returns.

Honest for the first calls (the correctness child saves outputs right away).
"""

import threading
import time

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest

_HONEST_CALLS = 12


class ModelNew(_Honest):
    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        if type(self).calls <= _HONEST_CALLS:
            return super().forward(x)
        out = torch.zeros_like(x)
        src = x.clone()

        def later() -> None:
            time.sleep(0.05)
            with torch.no_grad():
                out.copy_(_Honest.forward(self, src))

        threading.Thread(target=later, daemon=True).start()
        return out
