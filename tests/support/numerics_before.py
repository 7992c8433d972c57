"""The output comparisons of gates 2 and 3 spelled out over whole float64 copies (the oracle).

Gate 3 counts agreeing non-finite values as no error (the baseline's own overflow too);
complex outputs are compared part by part (real and imaginary), in both gates; a bfloat16
output may be one unit in the last place away in gate 2.

A frozen copy of ``gates/numerics.py`` (commit f0f7fbb): every rule spelled out over
whole float64 copies.  ``test_numerics_fast`` holds the library to it: the same
verdicts, numbers and messages on random and adversarial outputs.  Test oracle only;
``scripts/bench_gate_comparisons.py`` times it as the "before".
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

_TINY = 1e-30


@contextmanager
def comparison_threads(limit: int = 1) -> Iterator[None]:
    """Compare on at most ``limit`` intra-op threads, torch's own count restored after.

    The comparisons are ~20 elementwise ops per 1M-element chunk, each ending at
    an OpenMP barrier.  With torch's default of one thread per CPU, two gate
    processes comparing at once (two GPU workers on one host) spin against each
    other at every barrier, ten times slower or worse (docs/TEAM_NOTES.md,
    "Measurements behind the code").  One thread never waits on a barrier and is
    at most ~1.5x slower than two on an idle machine.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(limit, before)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class TensorComparison:
    """One output leaf compared with its reference."""

    index: int
    shape: list[int]
    ref_shape: list[int]
    dtype: str
    ref_dtype: str
    ok: bool
    problem: str = ""  # first reason it failed, "" when ok
    numel: int = 0
    max_abs_err: float = 0.0
    ref_max_abs: float = 0.0
    ref_rms: float = 0.0
    scale_err: float = 0.0  # Linf(err) / Linf(ref)
    rel_l2_err: float = 0.0  # ||err|| / ||ref||
    mismatched: int = 0  # elements outside rtol/atol
    unwritten: int = 0  # NaN (poison) where the reference is finite
    nonfinite: int = 0  # non-finite where the reference is finite, poison excluded
    worst_index: list[int] = field(default_factory=list)
    worst_value: float | None = None
    worst_ref: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OutputComparison:
    """All leaves of one call compared; ``ok`` only if structure and every leaf match."""

    ok: bool
    problem: str
    leaves: list[TensorComparison]

    @property
    def max_scale_err(self) -> float:
        return max((leaf.scale_err for leaf in self.leaves), default=0.0)

    @property
    def max_abs_err(self) -> float:
        return max((leaf.max_abs_err for leaf in self.leaves), default=0.0)

    @property
    def unwritten(self) -> int:
        return sum(leaf.unwritten for leaf in self.leaves)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problem": self.problem,
            "leaves": [x.as_dict() for x in self.leaves],
        }


def _finite_float(value: float) -> float:
    return value if math.isfinite(value) else float("inf")


def _real_view(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def compare_tensor(
    index: int,
    out: torch.Tensor,
    ref: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
) -> TensorComparison:
    """Compare one output tensor with its reference (both on the CPU)."""
    base = {
        "index": index,
        "shape": list(out.shape),
        "ref_shape": list(ref.shape),
        "dtype": str(out.dtype).removeprefix("torch."),
        "ref_dtype": str(ref.dtype).removeprefix("torch."),
        "numel": ref.numel(),
    }
    if out.shape != ref.shape:
        return TensorComparison(
            **base, ok=False, problem=f"shape {list(out.shape)} != expected {list(ref.shape)}"
        )
    if out.dtype != ref.dtype:
        return TensorComparison(
            **base, ok=False, problem=f"dtype {base['dtype']} != expected {base['ref_dtype']}"
        )
    if ref.numel() == 0:
        return TensorComparison(**base, ok=True)
    if not (ref.is_floating_point() or ref.is_complex()):
        diff = out != ref
        mismatched = int(diff.sum())
        worst = _first_index(diff) if mismatched else []
        return TensorComparison(
            **base,
            ok=mismatched == 0,
            problem="" if mismatched == 0 else f"{mismatched} of {ref.numel()} values differ",
            mismatched=mismatched,
            max_abs_err=float((out.double() - ref.double()).abs().max()) if mismatched else 0.0,
            worst_index=worst,
        )
    if ref.is_complex():  # real and imaginary parts, each an element of its own
        out, ref = _real_view(out), _real_view(ref)
        base["numel"] = ref.numel()
    if ref.dtype.is_floating_point and torch.finfo(ref.dtype).eps > rtol:
        scale_tol = max(scale_tol, torch.finfo(ref.dtype).eps)  # one unit at the largest value
    st = _float_stats(out, ref, rtol=rtol, atol=atol)
    unwritten, nonfinite, mismatched = st.unwritten, st.nonfinite, st.mismatched
    ref_max, max_err = st.ref_max, st.max_err
    ref_rms = math.sqrt(st.ref_sq / ref.numel())
    scale = max(ref_max, _TINY)
    scale_err = max_err / scale if ref_max > 0 else (0.0 if max_err == 0 else float("inf"))
    l2_ref = math.sqrt(st.ref_sq)
    l2_err = math.sqrt(st.err_sq)
    rel_l2 = l2_err / l2_ref if l2_ref > 0 else (0.0 if max_err == 0 else float("inf"))
    worst = _unravel(st.worst_flat, list(ref.shape)) if max_err > 0 else []
    worst_value = float(out.reshape(-1)[st.worst_flat]) if worst else None
    worst_ref = float(ref.reshape(-1)[st.worst_flat]) if worst else None
    if unwritten:
        problem = f"{unwritten} of {ref.numel()} elements never written (still NaN poison)"
    elif nonfinite:
        problem = f"{nonfinite} non-finite values where the reference is finite"
    elif st.special_bad:
        problem = f"{st.special_bad} NaN/inf values of the reference not reproduced"
    elif mismatched:
        problem = f"{mismatched} of {ref.numel()} elements outside rtol={rtol:g}, atol={atol:g}"
    elif scale_err > scale_tol:
        problem = (
            f"error {max_err:.3g} is {scale_err:.3g} of the output's magnitude {ref_max:.3g} "
            f"(limit {scale_tol:g}): within the absolute tolerance only because the output is tiny"
        )
    else:
        problem = ""
    return TensorComparison(
        **base,
        ok=not problem,
        problem=problem,
        max_abs_err=_finite_float(max_err),
        ref_max_abs=ref_max,
        ref_rms=ref_rms,
        scale_err=_finite_float(scale_err),
        rel_l2_err=_finite_float(rel_l2),
        mismatched=mismatched,
        unwritten=unwritten,
        nonfinite=nonfinite,
        worst_index=worst,
        worst_value=worst_value,
        worst_ref=worst_ref,
    )


# elements per chunk of the float comparison: its float64 temporaries (8 MiB each) are
# reused from the allocator instead of being faulted in afresh for every operation
# over the whole output, several times faster on outputs of millions of elements
_CHUNK = 1 << 20


@dataclass
class _FloatStats:
    """Sums, counts and maxima of one float comparison, accumulated chunk by chunk."""

    unwritten: int = 0
    nonfinite: int = 0
    special_bad: int = 0
    mismatched: int = 0
    ref_max: float = 0.0
    max_err: float = 0.0
    worst_flat: int = 0  # first flat index holding max_err
    ref_sq: float = 0.0  # sum of squared finite reference values
    err_sq: float = 0.0  # sum of squared errors where both sides are finite


def _unit(r: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of ``dtype`` at each (finite, float64) value of ``r``."""
    info = torch.finfo(dtype)
    exponent = torch.floor(torch.log2(r.abs().clamp_min(info.tiny)))
    return torch.clamp_min(torch.exp2(exponent) * info.eps, info.tiny * info.eps).masked_fill(
        r == 0, info.tiny * info.eps
    )


def _float_stats(out: torch.Tensor, ref: torch.Tensor, *, rtol: float, atol: float) -> _FloatStats:
    """Compare in float64 over flat chunks; every rule is elementwise or a reduction.

    Outputs of a dtype whose unit in the last place is wider than ``rtol`` (bfloat16)
    may also be one unit away."""
    coarse = ref.dtype.is_floating_point and torch.finfo(ref.dtype).eps > rtol
    st = _FloatStats()
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    for start in range(0, r_flat.numel(), _CHUNK):
        o = o_flat[start : start + _CHUNK].double()
        r = r_flat[start : start + _CHUNK].double()
        ref_finite = torch.isfinite(r)
        out_nan = torch.isnan(o)
        st.unwritten += int((out_nan & ref_finite).sum())
        st.nonfinite += int((~torch.isfinite(o) & ~out_nan & ref_finite).sum())
        # non-finite reference values must be reproduced exactly (same NaN / same inf)
        same = (o == r) | (out_nan & torch.isnan(r))
        st.special_bad += int((~ref_finite & ~same).sum())
        both = ref_finite & torch.isfinite(o)
        err = torch.where(both, (o - r).abs(), torch.zeros_like(r))
        r_fin = torch.where(ref_finite, r, torch.zeros_like(r))
        st.ref_max = max(st.ref_max, float(r_fin.abs().max()))
        st.ref_sq += float(r_fin.square().sum())
        st.err_sq += float(err.square().sum())
        bound = atol + rtol * r.abs()
        if coarse:
            bound = torch.maximum(bound, _unit(torch.where(ref_finite, r, 0.0), ref.dtype))
        bad = (~both | (err > bound)) & ref_finite  # non-finite refs: above
        st.mismatched += int(bad.sum())
        chunk_max = float(err.max())
        if chunk_max > st.max_err:  # strictly: an earlier chunk keeps a tie
            st.max_err = chunk_max
            st.worst_flat = start + int((err == chunk_max).nonzero()[0, 0])
    return st


def _unravel(flat: int, shape: list[int]) -> list[int]:
    """The multi-index of a row-major flat index ([] for a 0-d tensor)."""
    index: list[int] = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def _first_index(mask: torch.Tensor) -> list[int]:
    hits = mask.nonzero()
    return [int(v) for v in hits[0]] if hits.numel() else []


def compare_outputs(
    outs: list[Any],
    refs: list[Any],
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
) -> OutputComparison:
    """Compare flattened output leaves; structure (count, tensor-ness) must match."""
    if len(outs) != len(refs):
        return OutputComparison(False, f"{len(outs)} outputs, expected {len(refs)}", [])
    leaves: list[TensorComparison] = []
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return OutputComparison(
                    False, f"output {i} is {type(o).__name__}, expected a tensor", leaves
                )
            leaves.append(
                compare_tensor(i, o.detach().cpu(), r, rtol=rtol, atol=atol, scale_tol=scale_tol)
            )
        elif o != r:
            return OutputComparison(False, f"output {i} is {o!r}, expected {r!r}", leaves)
    bad = [leaf for leaf in leaves if not leaf.ok]
    problem = f"output {bad[0].index}: {bad[0].problem}" if bad else ""
    return OutputComparison(not bad, problem, leaves)


# ---------------------------------------------------------------------------
# V_model: the float64 error-ratio rule (docs/method.md#gates, gate 3)


@dataclass(frozen=True)
class ModelErrorReport:
    """The V_model numbers for one input set."""

    ok: bool
    rule: str  # "tolerance", "rho", "scale_relative", "structure"
    reason: str
    d_ref: float | None = None  # Linf(b32 - b64): the baseline's own rounding error
    d_opt: float | None = None  # Linf(o32 - b64)
    rho: float | None = None
    d_32: float = 0.0  # Linf(o32 - b32)
    scale: float = 0.0  # Linf(b64) (or b32 when b64 is unavailable)
    tolerance_pass: bool = False  # o32 within the 1e-4 tolerance of b32, scale-aware
    bound: float | None = None  # the threshold the deciding rule compared against

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _linf(a: torch.Tensor, b: torch.Tensor, baseline: torch.Tensor | None = None) -> float:
    """``max |a - b|``; equal values (the same NaN or infinity too) are no error, nor, with
    ``baseline``, a non-finite baseline value that ``a`` reproduces."""
    if a.numel() == 0:
        return 0.0
    a, b = a.double(), b.double()
    d = (a - b).abs()
    agree = (a == b) | (torch.isnan(a) & torch.isnan(b))
    if baseline is not None:
        c = baseline.double()
        agree |= ~torch.isfinite(c) & ((a == c) | (torch.isnan(a) & torch.isnan(c)))
    d = torch.where(agree, torch.zeros_like(d), d)
    value = float(d.max())
    return value if not math.isnan(value) else float("inf")


def _allclose(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    if a.numel() == 0:
        return True
    return bool(torch.isclose(a, b, rtol=tol, atol=tol, equal_nan=True).all())


def _concat(leaves: list[torch.Tensor]) -> torch.Tensor:
    flat = [t.detach().reshape(-1).double().cpu() for t in leaves if t.is_floating_point()]
    return torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)


def model_error_rule(
    o32: list[torch.Tensor],
    b32: list[torch.Tensor],
    b64: list[torch.Tensor] | None,
    *,
    tolerance: float,
    rho_max: float,
    d_ref_floor: float,
    abs_bound: float,
) -> ModelErrorReport:
    """Decide V_model for one input set.

    Order (docs/method.md#gates): the stricter ``tolerance`` first (scale-aware, so
    tiny outputs cannot pass as zeros); failing that, the float64 fallback:
    ``rho = d_opt / d_ref <= rho_max`` when the baseline has rounding error
    (``d_ref >= d_ref_floor``), else a scale-relative bound with an absolute
    floor.  A systematic bias grows linearly with depth while honest rounding
    grows ~sqrt(depth), which is what pushes rho into the hundreds for biased
    kernels and keeps it at 1-3 for honest ones.
    """
    o32, b32 = [_real_view(t) for t in o32], [_real_view(t) for t in b32]
    b64 = [_real_view(t) for t in b64] if b64 is not None else None
    if len(o32) != len(b32) or any(o.shape != b.shape for o, b in zip(o32, b32, strict=False)):
        return ModelErrorReport(False, "structure", "output structure differs from the baseline")
    o = _concat(o32)
    b = _concat(b32)
    nonfinite = int((~torch.isfinite(o) & torch.isfinite(b)).sum())
    if nonfinite:
        return ModelErrorReport(
            False, "structure", f"{nonfinite} non-finite outputs where the baseline is finite"
        )
    d_32 = _linf(o, b)
    scale32 = float(b[torch.isfinite(b)].abs().max()) if b.numel() else 0.0
    # Elementwise allclose at the strict tolerance, plus the same bound measured
    # against the output's magnitude so that tiny outputs cannot pass as zeros.
    tol_pass = _allclose(o, b, tolerance) and d_32 <= tolerance * scale32 + abs_bound
    if b64 is None:
        bound = tolerance * scale32 + abs_bound
        ok = d_32 <= bound
        return ModelErrorReport(
            ok,
            "scale_relative",
            (
                "no float64 baseline: "
                + ("within" if ok else "outside")
                + f" {tolerance:g} x scale {scale32:.3g} of the fp32 baseline (error {d_32:.3g})"
            ),
            d_32=d_32,
            scale=scale32,
            tolerance_pass=tol_pass,
            bound=bound,
        )
    r = _concat(b64)
    d_ref = _linf(b, r, baseline=b)
    d_opt = _linf(o, r, baseline=b)
    scale = float(r[torch.isfinite(r)].abs().max()) if r.numel() else 0.0
    common = {
        "d_ref": d_ref,
        "d_opt": d_opt,
        "d_32": d_32,
        "scale": scale,
        "tolerance_pass": tol_pass,
    }
    if tol_pass:
        return ModelErrorReport(
            True,
            "tolerance",
            f"within {tolerance:g} of the fp32 baseline (error {d_32:.3g}, scale {scale32:.3g})",
            rho=(d_opt / d_ref) if d_ref >= d_ref_floor else None,
            bound=tolerance * scale32 + abs_bound,
            **common,
        )
    if d_ref >= d_ref_floor:
        rho = d_opt / d_ref
        ok = rho <= rho_max
        return ModelErrorReport(
            ok,
            "rho",
            f"rho = d_opt/d_ref = {d_opt:.3g}/{d_ref:.3g} = {rho:.3g} "
            + ("<=" if ok else ">")
            + f" {rho_max:g}",
            rho=rho,
            bound=rho_max,
            **common,
        )
    bound = tolerance * scale + abs_bound
    ok = d_opt <= bound
    return ModelErrorReport(
        ok,
        "scale_relative",
        f"baseline exact (d_ref {d_ref:.3g} < {d_ref_floor:g}): error {d_opt:.3g} "
        + ("<=" if ok else ">")
        + f" {tolerance:g} x {scale:.3g} + {abs_bound:g}",
        bound=bound,
        **common,
    )
