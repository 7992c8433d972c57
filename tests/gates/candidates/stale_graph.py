"""Cheat -- after the first calls, replays a CUDA graph captured on the first input buffer.

The replay reads whatever the captured buffer holds, not the current input.
"""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest

_HONEST_CALLS = 12


class ModelNew(_Honest):
    calls = 0

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self._graph = None
        self._out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        if type(self).calls <= _HONEST_CALLS or not x.is_cuda:
            return super().forward(x)
        if self._graph is None:
            self._static = x.clone()
            super().forward(self._static)  # warm-up before capture
            torch.cuda.synchronize()
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                self._out = super().forward(self._static)
        self._graph.replay()
        return self._out
