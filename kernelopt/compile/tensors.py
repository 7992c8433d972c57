"""Copies of captured arguments that keep their layout: the wrapper asserts sizes and strides.

Shared by the compile step of every problem kind, rehydration and the harness;
it imports torch only when called.
"""

from __future__ import annotations

from typing import Any


def clone_exact(t: Any) -> Any:
    """A copy with the same sizes and strides (the wrapper asserts both)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach()
    try:
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        out.copy_(t)
        return out
    except RuntimeError:  # overlapping layouts (expanded tensors) cannot be written
        return t.clone()


__all__ = ["clone_exact"]
