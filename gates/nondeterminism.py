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

# Float outputs of two same-seed calls that differ by at most this fraction of the output's
# largest magnitude differ in summation order only (atomics: scatter_add or index_add on a
# GPU), ten times inside the gates' strictest tolerance (GateSettings.model_tolerance): such
# a reference still judges candidates, and the policy states its jitter
JITTER_REL = 1e-5
# traced call pairs tried before the op is given up as unnamed: atomics differ only now and
# then (scatter_add on the H200: docs/TEAM_NOTES.md, thirty-fifth session)
TRACE_TRIES = 8


POLICIES = (
    "policies: model_mode=eval (GateSettings.model_mode, or KERNELOPT_MODE = 'eval' in the file) "
    "turns dropout and batch statistics off; randomness from torch's, Python's or NumPy's RNG is "
    "seeded per call; state kept in registered buffers or parameters is restored before every "
    f"call; float jitter within {JITTER_REL:g} of an output's scale (atomics' summation order) is "
    "accepted -- anything else (clocks, os.urandom, Python attributes counting calls, larger "
    "atomics) must go"
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


def float_jitter(first: list[Any], second: list[Any]) -> float | None:
    """The largest difference between two same-seed calls' outputs, as a fraction of each
    output's largest magnitude, when every difference is such float jitter (``JITTER_REL``);
    None when any output differs otherwise (an integer, a shape, a larger change)."""
    if len(first) != len(second):
        return None
    worst = 0.0
    for a, b in zip(first, second, strict=True):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            if a != b:
                return None
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return None
        if torch.equal(a, b):
            continue
        if not a.is_floating_point() or not a.numel():
            return None
        a64, b64 = a.detach().double(), b.detach().double()
        if not torch.equal(torch.isnan(a64), torch.isnan(b64)):
            return None
        scale = float(torch.nan_to_num(a64, nan=0.0).abs().max())
        diff = float(torch.nan_to_num(a64 - b64, nan=0.0).abs().max())
        if diff > JITTER_REL * scale:  # also a zero scale with any difference
            return None
        worst = max(worst, diff / scale)
    return worst


def divergent_op(call: Callable[[], Any], path: str) -> str:
    """'aten.xxx at model.py:12' for the first op whose output differs between calls:
    traced calls are compared with the first until one differs (``TRACE_TRIES``)."""
    first = _OpTrace(path)
    with first:
        call()
    for _ in range(TRACE_TRIES):
        trace = _OpTrace(path)
        with trace:
            call()
        named = _first_divergence(first.ops, trace.ops)
        if named:
            return named
    return ""


def _first_divergence(ops_a: list[tuple[str, str, str]], ops_b: list[tuple[str, str, str]]) -> str:
    for (op_a, fp_a, where), (op_b, fp_b, _) in zip(ops_a, ops_b, strict=False):
        at = f" at {where}" if where else ""
        if op_a != op_b:
            return f"the op sequence changes ({op_a} then {op_b}){at}"
        if fp_a != fp_b:
            return f"{op_a}{at}"
    if len(ops_a) != len(ops_b):
        return "the number of ops changes between calls"
    return ""


def nondeterministic_error(difference: str, op: str) -> NondeterministicReference:
    where = f"first at {op}" if op else "the op could not be named (outside torch's dispatch?)"
    return NondeterministicReference(
        f"the reference is not deterministic: two calls with the same seed, state and inputs "
        f"differ ({difference}); {where}. {POLICIES}"
    )
