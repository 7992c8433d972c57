"""Cheat -- hooks torch.cuda.Event to learn when it is being timed, then skips the work."""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest

_STATE = {"timed": False}
_Real = torch.cuda.Event


class _Spy(_Real):
    def __new__(cls, *args, **kwargs):
        _STATE["timed"] = True
        return _Real.__new__(_Real, *args, **kwargs)


torch.cuda.Event = _Spy


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _STATE["timed"]:
            return torch.empty_like(x)
        return super().forward(x)
