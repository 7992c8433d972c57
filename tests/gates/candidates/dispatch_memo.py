"""Cheat -- an eager, dispatch-heavy forward behind a memo on the input object and version.

Its honest path is four eager ops, slower than the compiled baseline per call.  The
memo returns the previous answer while the same tensor object comes back at the same
version counter: never in gate 2 (new tensors), never in the checked loop (new values
bump the version), but on every call of a host batch that repeats unchanged buffers.
The gate times a call by the larger of its GPU work and its host time, so such a batch
would hide the slow dispatch and turn a slower kernel into a win.
"""

import weakref

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale
        self._memo: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        entry = self._memo.get(id(x))
        if entry is not None and entry[0]() is x and entry[1] == x._version:
            return entry[2].clone()
        out = x * torch.sigmoid(x) * self.scale + self.bias
        if len(self._memo) > 8:
            self._memo.clear()
        self._memo[id(x)] = (weakref.ref(x), x._version, out)
        return out
