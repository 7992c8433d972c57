"""Cheat -- a deferred output: a tensor subclass whose values are computed only when read.

A checker that reads every output (gate 2) sees right values; timing that
never reads them sees a forward that did nothing.
"""

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest


class _Deferred(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, _Deferred) and getattr(a, "_pending", None) is not None:
                model, x = a._pending
                a._pending = None
                torch.Tensor.copy_(a.as_subclass(torch.Tensor), _Honest.forward(model, x))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x).as_subclass(_Deferred)
        out._pending = (self, x)
        return out
