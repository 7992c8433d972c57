"""Poisoned allocations: unwritten output elements must show up as NaN.

The classic KernelBench exploit allocates the output with ``torch.empty`` and
writes only part of it (or nothing), relying on recycled memory that still
holds the reference's answer.  Two layers make such memory hold NaN instead:

* ``PoisonAllocations`` -- a dispatch mode active while candidate code runs:
  every ``empty``-family allocation is filled with 0xFF bytes (NaN for every
  float dtype, -1 for integers) before the candidate sees it.  It works on any
  device, including the CPU under the Triton interpreter.
* ``poison_cached_blocks`` -- on CUDA, before each call, blocks of exactly the
  expected output sizes are filled with 0xFF and released to the caching
  allocator, so an allocation that bypasses the dispatch mode still lands on
  poison (best-fit reuse of a same-size free block).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
_EMPTY_OPS = {
    _aten.empty.memory_format,
    _aten.empty_like.default,
    _aten.empty_strided.default,
    _aten.new_empty.default,
    _aten.new_empty_strided.default,
}
POISON_BYTE = 0xFF


def poison_(t: torch.Tensor) -> None:
    """Fill a tensor's bytes with 0xFF (NaN for floats) regardless of its dtype."""
    if t.numel() == 0 or t.is_complex():
        if t.is_complex():
            t.fill_(complex(float("nan"), float("nan")))
        return
    if t.dtype == torch.bool:
        t.fill_(True)
        return
    if t.is_contiguous():
        t.view(torch.uint8).fill_(POISON_BYTE)
    elif t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(-1)


class PoisonAllocations(TorchDispatchMode):
    """Fill every freshly allocated ``empty`` tensor with poison while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in _EMPTY_OPS and isinstance(out, torch.Tensor):
            poison_(out)
            self.count += 1
        return out


def poison_cached_blocks(sizes: list[int], device: str) -> None:
    """Leave freed, poisoned blocks of the given byte sizes in CUDA's caching allocator."""
    if not device.startswith("cuda") or not sizes:
        return
    blocks = [torch.empty(max(1, n), dtype=torch.uint8, device=device) for n in sizes if n > 0]
    for block in blocks:
        block.fill_(POISON_BYTE)
    torch.cuda.synchronize()
    del blocks
