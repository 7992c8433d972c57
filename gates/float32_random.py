"""Float64 reference calls draw their random numbers in float32 (issue 30).

Gate 3 compares a candidate with a float64 run of the reference.  When the
forward draws random numbers (``torch.randn_like(x)``, dropout), a float64
draw from the same seed is a different sequence from the float32 one, so the
float64 run would compute with other noise and its error ratio would mean
nothing.  Under this dispatch mode every random op that would produce float64
draws in float32 from the same generator state and is widened, so both
references see the same noise.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
_FACTORY = {aten.randn, aten.rand, aten.normal}
_LIKE = {aten.randn_like, aten.rand_like}
_INPLACE = {aten.normal_, aten.uniform_, aten.bernoulli_, aten.exponential_, aten.cauchy_}


def _double(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype == torch.float64


class Float32Randomness(TorchDispatchMode):
    """Random float64 results drawn as float32 and widened (same generator, same state)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        packet = func.overloadpacket
        if packet in _INPLACE and args and _double(args[0]):
            scratch = torch.empty_like(args[0], dtype=torch.float32)
            func(scratch, *args[1:], **kwargs)
            return args[0].copy_(scratch)
        if packet in _LIKE and args and _double(args[0]) and kwargs.get("dtype") is None:
            return func(args[0].float(), *args[1:], **kwargs).double()
        if packet in _FACTORY and kwargs.get("dtype") == torch.float64:
            kwargs["dtype"] = torch.float32
            return func(*args, **kwargs).double()
        if packet is aten.native_dropout and args and _double(args[0]):
            _, mask = func(args[0].float(), *args[1:], **kwargs)
            p = float(args[1])
            scale = 1.0 / (1.0 - p) if p < 1.0 else 0.0
            return args[0] * mask * scale, mask
        return func(*args, **kwargs)
