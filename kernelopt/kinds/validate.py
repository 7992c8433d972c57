"""Runtime checks of a kernel problem: does it fit, is its reference reproducible, is it right.

Each failure is a ``ProblemError`` with the file and the reason -- a bad
problem must stop a campaign before any GPU-hour is spent on it, and never be
retried:

* **fits in GPU memory** -- the input generators run on the meta device
  (shapes and dtypes, no storage), the reference runs there too when it can
  (output shapes); twice the bytes of inputs plus outputs (gate 3 keeps a
  float64 copy of both) must be below the device's free memory.  On the CPU
  the check is skipped;
* **inputs are reproducible** -- ``get_inputs()`` twice under one seed gives
  the same values (every gate child regenerates them from the seed);
* **reference is deterministic** -- two runs on the same inputs agree
  bitwise: candidates are judged against one reference run, so a reference
  using atomics or unseeded randomness would fail honest candidates at random;
* **the baseline computes its reference** (compile step only) -- the file's
  own kernel within gate 2's tolerance of the reference, or no candidate that
  reproduces it could ever pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernelopt.errors import ProblemError
from kernelopt.loaded_problem import (
    KernelProblem,
    check_dense_outputs,
    check_forward_inputs,
    seeded,
)

GATE2_RTOL = 1e-3  # gate 2's defaults (GateSettings): the baseline must pass what candidates must
GATE2_ATOL = 1e-3
GATE2_SCALE = 2e-3
FLOAT64_FACTOR = 2  # gate 3 holds float64 copies of inputs and outputs


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one call needs, from shapes alone."""

    set_name: str
    input_bytes: int
    output_bytes: int | None  # None: the reference could not run on the meta device
    note: str = ""

    @property
    def need_bytes(self) -> int:
        out = self.output_bytes if self.output_bytes is not None else self.input_bytes
        return FLOAT64_FACTOR * (self.input_bytes + out)


def leaves(value: Any) -> list[Any]:
    from torch.utils._pytree import tree_leaves

    return list(tree_leaves(value))


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in leaves(values) if isinstance(v, torch.Tensor))


def _as_list(value: Any, what: str, label: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise ProblemError(label, f"{what} must return a list, got {type(value).__name__}")
    return list(value)


def _call(fn: Any, what: str, label: str) -> Any:
    try:
        return fn()
    except ProblemError:
        raise
    except Exception as exc:
        raise ProblemError(label, f"{what} raised {type(exc).__name__}: {exc}") from exc


def _generate(problem: KernelProblem, seed: int, meta: bool) -> Iterator[tuple[str, list[Any]]]:
    import torch

    label = problem.path
    with torch.device("meta") if meta else contextlib.nullcontext():
        drawn = seeded(seed, lambda: _call(problem.get_inputs, "get_inputs()", label))
        main = _as_list(drawn, "get_inputs()", label)
        check_forward_inputs(main, "get_inputs()", label)
        yield "get_inputs()", main
        if problem.get_holdout_inputs is None:
            return
        what = "get_holdout_inputs()"
        holdout = problem.get_holdout_inputs
        cases = _as_list(seeded(seed, lambda: _call(holdout, what, label)), what, label)
        for i, case in enumerate(cases):
            held = _as_list(case, f"{what}[{i}]", label)
            check_forward_inputs(held, f"{what}[{i}]", label)
            yield f"get_holdout_inputs()[{i}]", held


def input_lists(problem: KernelProblem, seed: int = 0) -> list[tuple[str, list[Any]]]:
    """Every input list the generators yield, on the meta device where they allow it."""
    try:
        return list(_generate(problem, seed, meta=True))
    except Exception:  # a generator that needs real storage (.item(), numpy): run it for real
        return list(_generate(problem, seed, meta=False))


def estimate_memory(problem: KernelProblem, seed: int = 0) -> list[MemoryEstimate]:
    """Bytes per input set from shapes (meta device); outputs from the reference where it runs."""
    import torch

    out = []
    for set_name, values in input_lists(problem, seed):
        in_bytes = _nbytes(values)
        out_bytes, note = None, ""
        meta = [
            torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v for v in values
        ]
        try:
            with torch.no_grad():
                out_bytes = _nbytes(leaves(problem.reference(*meta)))
        except Exception as exc:  # the reference needs real data: assume outputs ~ inputs
            note = f"reference does not run on the meta device ({type(exc).__name__})"
        out.append(MemoryEstimate(set_name, in_bytes, out_bytes, note))
    return out


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_fits(problem: KernelProblem, device: str, seed: int = 0) -> list[MemoryEstimate]:
    """``ProblemError`` when an input set cannot fit in the device's free memory (CUDA only)."""
    if not device.startswith("cuda"):
        return []
    import torch

    estimates = estimate_memory(problem, seed)
    free, total = torch.cuda.mem_get_info(torch.device(device))
    worst = max(estimates, key=lambda e: e.need_bytes)
    if worst.need_bytes > free:
        outputs = (
            _gib(worst.output_bytes) if worst.output_bytes is not None else "unknown (~inputs)"
        )
        raise ProblemError(
            problem.path,
            f"inputs do not fit in GPU memory: {worst.set_name} holds {_gib(worst.input_bytes)} "
            f"of inputs and {outputs} of outputs; verification needs about "
            f"{_gib(worst.need_bytes)} ({FLOAT64_FACTOR}x inputs + outputs: gate 3 keeps float64 "
            f"copies) but {torch.cuda.get_device_name(torch.device(device))} has "
            f"{_gib(free)} free of {_gib(total)}",
        )
    return estimates


def same_values(a: Any, b: Any) -> bool:
    """Bitwise equality that treats NaN == NaN (``torch.equal`` first: one pass, on the
    tensors' own device when they share one; NaN falls through to the NaN-aware rule)."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a, b = a.detach(), b.detach()
        if a.device != b.device:
            a, b = a.cpu(), b.cpu()
        if torch.equal(a, b):
            return True
        if a.is_floating_point() or a.is_complex():
            return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
        return False
    return bool(a == b)


@dataclass(frozen=True)
class LeafMismatch:
    """Where two output lists first part in structure, before any value is compared."""

    what: str  # "count" (of outputs), "value" (a non-tensor output), "shape" or "dtype"
    index: int  # the output's position (0 for "count")
    got: Any  # the output (its count for "count")
    want: Any


def tensor_pairs(got: list[Any], want: list[Any]) -> Iterator[tuple[int, Any, Any] | LeafMismatch]:
    """The paired tensor outputs in order, for the caller's value check; the first
    structural mismatch ends the walk.  Gate screening and the compile step's baseline
    check both walk outputs this way; each words the mismatch its own way."""
    import torch

    if len(got) != len(want):
        yield LeafMismatch("count", 0, len(got), len(want))
        return
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                yield LeafMismatch("value", i, a, b)
                return
            continue
        parted = next(
            (what for what in ("shape", "dtype") if getattr(a, what) != getattr(b, what)), ""
        )
        if parted:
            yield LeafMismatch(parted, i, a, b)
            return
        yield i, a, b


def _clone(values: list[Any]) -> list[Any]:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def first_difference(first: list[Any], second: list[Any]) -> str | None:
    """Where two runs' values first differ, in words; None when they are the same.

    The reference's determinism is checked by the compile step and by the gates'
    reference child: both say the difference in these words."""
    import torch

    if len(first) != len(second):
        return f"{len(first)} outputs, then {len(second)}"
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        if same_values(a, b):
            continue
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
            diff = (a.detach().double() - b.detach().double()).abs().nan_to_num(0.0)
            count = int((diff > 0).sum())
            return (
                f"output {i}: max |diff| {float(diff.max()):.3g}, {count} of {a.numel()} "
                "elements differ"
            )
        return f"output {i} differs in shape, dtype or value"
    return None


def check_inputs_reproducible(problem: KernelProblem, seed: int = 0) -> None:
    """``get_inputs()`` twice under one seed must give the same values."""
    difference = first_difference(problem.inputs(seed), problem.inputs(seed))
    if difference is not None:
        raise ProblemError(
            problem.path,
            "get_inputs() is not reproducible: two calls under the same torch.manual_seed gave "
            f"different values ({difference}); draw inputs from torch's "
            "RNG (torch.randn, ...) so a seed fixes them",
        )


def run_reference(problem: KernelProblem, inputs: list[Any]) -> list[Any]:
    import torch

    try:
        with torch.no_grad():
            outputs = leaves(problem.reference(*_clone(inputs)))
    except Exception as exc:
        raise ProblemError(problem.path, f"reference() raised {type(exc).__name__}: {exc}") from exc
    check_dense_outputs(outputs, problem.path)
    return outputs


def check_reference_deterministic(
    problem: KernelProblem, device: str, seed: int = 0, inputs: list[Any] | None = None
) -> list[Any]:
    """Run the reference twice on the same inputs; returns the first run's outputs."""
    values = inputs if inputs is not None else problem.inputs(seed, device)
    first = run_reference(problem, values)
    difference = first_difference(first, run_reference(problem, values))
    if difference is not None:
        raise ProblemError(
            problem.path,
            "reference() is not deterministic: two runs on the same inputs differ "
            f"({difference}). Candidates are compared with one reference "
            "run, so it must be reproducible: avoid atomics and unseeded randomness in it",
        )
    return first


def baseline_error(problem: KernelProblem, got: list[Any], want: list[Any]) -> str | None:
    """Why the baseline's outputs fail gate 2's tolerance against the reference, or None."""
    import torch

    for pair in tensor_pairs(got, want):
        if isinstance(pair, LeafMismatch):
            return _baseline_mismatch(problem.entry, pair)
        i, a, b = pair
        x, y = a.detach().double().cpu(), b.detach().double().cpu()
        if torch.allclose(x, y, rtol=GATE2_RTOL, atol=GATE2_ATOL, equal_nan=True):
            continue
        err = float((x - y).abs().nan_to_num(float("inf")).max())
        scale = float(y.abs().nan_to_num(0.0).max()) or 1.0
        from kernelopt.float_units import coarse_dtype

        coarse = coarse_dtype(b.dtype, GATE2_RTOL)
        if coarse is not None and _within_one_unit(x, y, coarse):
            continue
        if err / scale <= GATE2_SCALE:
            continue
        return (
            f"output {i}: max |{problem.entry} - reference| = {err:.3g} (reference scale "
            f"{scale:.3g}), beyond rtol = atol = {GATE2_RTOL:g} and the scale-aware {GATE2_SCALE:g}"
        )
    return None


def _within_one_unit(x: Any, y: Any, dtype: Any) -> bool:
    """Every element within gate 2's tolerance or one unit in the last place of ``dtype``."""
    import torch

    from kernelopt.float_units import ulps

    finite = torch.isfinite(y)
    if not bool(((x == y) | torch.isnan(x) & torch.isnan(y) | finite).all()):
        return False
    bound = torch.maximum(
        GATE2_ATOL + GATE2_RTOL * y.abs(), ulps(torch.where(finite, y, 0.0), dtype)
    )
    return bool(((x - y).abs() <= bound)[finite].all())


def _baseline_mismatch(entry: str, m: LeafMismatch) -> str:
    i, a, b = m.index, m.got, m.want
    if m.what == "count":
        return f"{entry} returned {a} output(s), reference {b}"
    if m.what == "value":
        return f"output {i}: {a!r} vs reference {b!r}"
    if m.what == "shape":
        return f"output {i} has shape {list(a.shape)}, reference {list(b.shape)}"
    return f"output {i} has dtype {a.dtype}, reference {b.dtype}"


def check_runtime(problem: KernelProblem, device: str, seed: int = 0) -> None:
    """The checks every reference run starts with: memory (CUDA) and a deterministic reference."""
    check_fits(problem, device, seed)
    check_reference_deterministic(problem, device, seed)


def baseline_rho(problem: KernelProblem, inputs: list[Any], got: list[Any]) -> str:
    """Gate 3's view of the baseline itself: ``rho = Linf(base - ref64) / Linf(ref32 - ref64)``.

    Diagnostic text for the compile record, never a rejection: a baseline near
    or above gate 3's limit (10) means candidates that reproduce its numerics
    will be rejected too (TF32 dots, approximate functions).
    """
    import torch

    doubles = [
        v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs
    ]
    try:
        ref32 = run_reference(problem, inputs)
        ref64 = run_reference(problem, doubles)
    except ProblemError as exc:
        return f"float64 reference unavailable ({exc.reason[:80]})"
    d_ref = d_opt = 0.0
    for a, r, b in zip(ref32, ref64, got, strict=False):
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (a, r, b)):
            continue
        r = r.detach().double()
        d_ref = max(d_ref, float((a.detach().double() - r).abs().nan_to_num(0.0).max()))
        d_opt = max(d_opt, float((b.detach().double() - r).abs().nan_to_num(0.0).max()))
    if d_ref < 1e-8:
        return f"baseline error vs float64 {d_opt:.3g} (reference exact)"
    return f"baseline rho vs float64 = {d_opt / d_ref:.3g} (gate 3 accepts <= 10)"
