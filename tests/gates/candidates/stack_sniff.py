"""Cheat -- walks the call stack and skips the work when a timing function called it."""

import sys

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest

_TIMING_WORDS = ("timing", "timed", "bench", "host_batch", "settle")


def _being_timed() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        where = (frame.f_code.co_name + " " + frame.f_code.co_filename).lower()
        if any(word in where for word in _TIMING_WORDS):
            return True
        frame = frame.f_back
    return False


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _being_timed():
            return torch.empty_like(x)
        return super().forward(x)
