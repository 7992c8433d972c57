"""Name the op that makes a reference non-deterministic (issue 30).

A reference whose two calls differ under the same seed and state cannot judge
any candidate: an honest one would fail at random.  The reference child then
runs the call twice more under a dispatch mode that fingerprints every op's
output, and names the first op whose output differs (with the problem file's
line that called it), so the error says where to look, not just that it
happened.  This runs only on that failure path.
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kernelopt.errors import DeterministicError

POLICIES = (
    "policies: model_mode=eval (GateSettings.model_mode, or KERNELOPT_MODE = 'eval' in the file) "
    "turns dropout and batch statistics off; randomness from torch's, Python's or NumPy's RNG is "
    "seeded per call; state kept in registered buffers or parameters is restored before every "
    "call -- anything else (clocks, os.urandom, Python attributes counting calls, atomics) "
    "must go"
)


class NondeterministicReference(DeterministicError):
    """Two reference calls with the same seed, state and inputs differ (one line)."""


def fingerprint(value: Any) -> str:
    """A digest of every tensor leaf's bytes (shape and dtype included)."""
    digest = hashlib.sha1()
    for leaf in tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            t = leaf.detach().to("cpu").contiguous().reshape(-1)
            digest.update(f"{list(leaf.shape)}{leaf.dtype}".encode())
            digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        else:
            digest.update(repr(leaf).encode())
    return digest.hexdigest()


class _OpTrace(TorchDispatchMode):
    """Every op's name, output fingerprint and the problem file's line that reached it."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = str(Path(path).resolve())
        self.ops: list[tuple[str, str, str]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        where = ""
        for frame in reversed(traceback.extract_stack()):
            if frame.filename and str(Path(frame.filename).resolve()) == self.path:
                where = f"line {frame.lineno} of the problem file"  # staged under another name
                break
        self.ops.append((str(func), fingerprint(out), where))
        return out


def divergent_op(call: Callable[[], Any], path: str) -> str:
    """'aten.xxx at model.py:12' for the first op whose output differs between two calls."""
    traces = []
    for _ in range(2):
        trace = _OpTrace(path)
        with trace:
            call()
        traces.append(trace.ops)
    for (op_a, fp_a, where), (op_b, fp_b, _) in zip(*traces, strict=False):
        at = f" at {where}" if where else ""
        if op_a != op_b:
            return f"the op sequence changes ({op_a} then {op_b}){at}"
        if fp_a != fp_b:
            return f"{op_a}{at}"
    if len(traces[0]) != len(traces[1]):
        return "the number of ops changes between calls"
    return ""


def nondeterministic_error(difference: str, op: str) -> NondeterministicReference:
    where = f"first at {op}" if op else "the op could not be named (outside torch's dispatch?)"
    return NondeterministicReference(
        f"the reference is not deterministic: two calls with the same seed, state and inputs "
        f"differ ({difference}); {where}. {POLICIES}"
    )
