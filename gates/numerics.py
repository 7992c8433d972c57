"""Output comparison: the numbers gates 2 and 3 decide on.

Pure functions over CPU tensors, no process or device logic, so the tolerance
policy lives in checker code the candidate never sees (and is unit-tested
directly).  Two rules beyond plain ``allclose``:

* **scale-aware error** -- ``Linf(out - ref) / Linf(ref)``.  An absolute
  tolerance of 1e-3 is meaningless for an output whose values are 1e-5: a zero
  tensor passes it.  Measured relative to the reference's own magnitude, zeros
  score 1.0 and honest fp32 kernels ~1e-6.
* **poison accounting** -- outputs are allocated on NaN-poisoned memory, so an
  element that is NaN where the reference is finite was (almost surely) never
  written.  Counting those separately turns "wrong values" into the much more
  useful "you wrote 10% of the output".

Where every value is finite (nearly always) the comparisons take a short path that
needs no masks and reuses the reference's own numbers (``gates.reference_facts``);
anywhere else they take the straightforward one.  Both give the same verdicts,
numbers and messages, bit for bit (``tests/gates/test_numerics_fast.py``, golden reports).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from gates import reference_facts
from gates.reference_facts import LeafFacts, ReferenceFacts, as_float64, finite_abs_max

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


def compare_tensor(
    index: int,
    out: torch.Tensor,
    ref: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
    facts: ReferenceFacts | None = None,
    source: torch.Tensor | None = None,
) -> TensorComparison:
    """Compare one output tensor with its reference (both on the CPU).

    ``facts`` keeps the reference's own numbers for the next candidate (one per bundle);
    ``source`` is the caller's own output object (``out`` when not given), which gate 3
    gets too.
    """
    source = out if source is None else source
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
    if ref.is_floating_point():
        leaf = (facts or ReferenceFacts()).leaf(ref, _CHUNK)
        st, maxima = _float_stats(out, ref, rtol=rtol, atol=atol, facts=leaf)
        if maxima is not None:
            leaf.remember_output(source, maxima)
    else:  # complex
        st = _plain_float_stats(out, ref, rtol=rtol, atol=atol)
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


# elements per chunk of the float comparison: the sums it reports add up per-chunk sums
# in order (this fixes their last bits), and a chunk holding a non-finite value takes the
# straightforward path alone, whose float64 temporaries (8 MiB each) are then reused from
# the allocator instead of being faulted in afresh for every operation over the output
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


def _float_stats(
    out: torch.Tensor, ref: torch.Tensor, *, rtol: float, atol: float, facts: LeafFacts
) -> tuple[_FloatStats, list[float] | None]:
    """Compare in float64 over flat chunks; every rule is elementwise or a reduction.

    A chunk where the reference and the output are finite takes the short path (no
    masks: nothing can be unwritten or non-finite there); any other chunk takes the
    straightforward one.  Also returns ``max |out - ref|`` per chunk when every chunk
    was finite, for gate 3 (None otherwise).
    """
    st = _FloatStats(ref_max=facts.ref_max, ref_sq=facts.ref_sq)
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    chunk, numel = facts.chunk, r_flat.numel()
    maxima: list[float] | None = []
    worst_chunk: int | None = None  # a finite chunk holds max_err: its index is found last
    block = min(reference_facts.BLOCK, numel)
    with facts.scratch.take(block, block, block, block, min(chunk, numel)) as bufs:
        for k, start in enumerate(range(0, numel, chunk)):
            o, r = o_flat[start : start + chunk], r_flat[start : start + chunk]
            top = None
            if facts.finite_chunks[k]:
                top = _finite_chunk(st, o, r, bufs, rtol=rtol, atol=atol)
            if top is None:
                before = st.max_err
                _plain_chunk(st, start, o.double(), r.double(), rtol=rtol, atol=atol)
                worst_chunk = None if st.max_err > before else worst_chunk
                maxima = None
                continue
            if top > st.max_err:  # strictly: an earlier chunk keeps a tie
                st.max_err, worst_chunk = top, start
            if maxima is not None:
                maxima.append(top)
        if worst_chunk is not None:
            o, r = (
                o_flat[worst_chunk : worst_chunk + chunk],
                r_flat[worst_chunk : worst_chunk + chunk],
            )
            st.worst_flat = worst_chunk + _first_error(o, r, st.max_err, bufs)
    return st, maxima


def _finite_chunk(
    st: _FloatStats,
    o: torch.Tensor,
    r: torch.Tensor,
    bufs: list[torch.Tensor],
    *,
    rtol: float,
    atol: float,
) -> float | None:
    """The straightforward chunk's sums and counts where ``r`` is finite; None if ``o`` is not.

    With every value finite the masks are all true and the error is ``|o - r|``; a
    block whose errors are all at most ``atol`` cannot exceed ``atol + rtol * |r|``,
    so its count is skipped.  The squares are summed over the chunk at once, as the
    straightforward path sums them.  Returns the chunk's largest error.
    """
    o_buf, r_buf, d_buf, t_buf, sq_buf = bufs
    top, mismatched = 0.0, 0
    for begin, end in reference_facts.blocks(0, r.numel()):
        o64, r64 = as_float64(o[begin:end], o_buf), as_float64(r[begin:end], r_buf)
        d = torch.sub(o64, r64, out=d_buf[: end - begin])
        block_top = finite_abs_max(d)
        if block_top is None:
            return None  # nothing added yet: the caller takes the straightforward path
        top = max(top, block_top)
        if not (rtol >= 0 and block_top <= atol):
            bound = torch.abs(r64, out=t_buf[: end - begin]).mul_(rtol).add_(atol)
            mismatched += int(torch.gt(d.abs_(), bound).sum())  # atol + rtol * |r|, as written
        torch.mul(d, d, out=sq_buf[begin:end])
    st.mismatched += mismatched
    st.err_sq += float(sq_buf[: r.numel()].sum())
    return top


def _first_error(o: torch.Tensor, r: torch.Tensor, value: float, bufs: list[torch.Tensor]) -> int:
    """The first flat index of a finite chunk where ``|o - r| == value``."""
    o_buf, r_buf, d_buf = bufs[:3]
    for begin, end in reference_facts.blocks(0, r.numel()):
        o64, r64 = as_float64(o[begin:end], o_buf), as_float64(r[begin:end], r_buf)
        hits = (torch.sub(o64, r64, out=d_buf[: end - begin]).abs_() == value).nonzero()
        if hits.numel():
            return begin + int(hits[0, 0])
    raise RuntimeError("the chunk's largest error is not in the chunk")  # deterministic: never


def _plain_chunk(
    st: _FloatStats, start: int, o: torch.Tensor, r: torch.Tensor, *, rtol: float, atol: float
) -> None:
    """The output-dependent numbers of one float64 chunk, every rule spelled out."""
    ref_finite = torch.isfinite(r)
    out_nan = torch.isnan(o)
    st.unwritten += int((out_nan & ref_finite).sum())
    st.nonfinite += int((~torch.isfinite(o) & ~out_nan & ref_finite).sum())
    # non-finite reference values must be reproduced exactly (same NaN / same inf)
    same = (o == r) | (out_nan & torch.isnan(r))
    st.special_bad += int((~ref_finite & ~same).sum())
    both = ref_finite & torch.isfinite(o)
    err = torch.where(both, (o - r).abs(), torch.zeros_like(r))
    st.err_sq += float(err.square().sum())
    bad = (~both | (err > atol + rtol * r.abs())) & ref_finite  # non-finite refs: above
    st.mismatched += int(bad.sum())
    chunk_max = float(err.max())
    if chunk_max > st.max_err:  # strictly: an earlier chunk keeps a tie
        st.max_err = chunk_max
        st.worst_flat = start + int((err == chunk_max).nonzero()[0, 0])


def _plain_float_stats(
    out: torch.Tensor, ref: torch.Tensor, *, rtol: float, atol: float
) -> _FloatStats:
    """``_float_stats`` without reference facts (complex outputs), every chunk spelled out."""
    st = _FloatStats()
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    for start in range(0, r_flat.numel(), _CHUNK):
        o = o_flat[start : start + _CHUNK].double()
        r = r_flat[start : start + _CHUNK].double()
        r_fin = torch.where(torch.isfinite(r), r, torch.zeros_like(r))
        st.ref_max = max(st.ref_max, float(r_fin.abs().max()))
        st.ref_sq += float(r_fin.square().sum())
        _plain_chunk(st, start, o, r, rtol=rtol, atol=atol)
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
    facts: ReferenceFacts | None = None,
) -> OutputComparison:
    """Compare flattened output leaves; structure (count, tensor-ness) must match.

    ``facts`` (the bundle's) keeps the references' own numbers across candidates.
    """
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
                compare_tensor(
                    i,
                    o.detach().cpu(),
                    r,
                    rtol=rtol,
                    atol=atol,
                    scale_tol=scale_tol,
                    facts=facts,
                    source=o,
                )
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


def _linf(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    d = (a.double() - b.double()).abs()
    both_nan = torch.isnan(a) & torch.isnan(b)
    d = torch.where(both_nan, torch.zeros_like(d), d)
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
    facts: ReferenceFacts | None = None,
) -> ModelErrorReport:
    """Decide V_model for one input set.

    Order (docs/method.md#gates): the stricter ``tolerance`` first (scale-aware, so
    tiny outputs cannot pass as zeros); failing that, the float64 fallback:
    ``rho = d_opt / d_ref <= rho_max`` when the baseline has rounding error
    (``d_ref >= d_ref_floor``), else a scale-relative bound with an absolute
    floor.  A systematic bias grows linearly with depth while honest rounding
    grows ~sqrt(depth), which is what pushes rho into the hundreds for biased
    kernels and keeps it at 1-3 for honest ones.  ``facts`` (the bundle's) keeps
    the baselines' own numbers, and gate 2's errors, for reuse.
    """
    if len(o32) != len(b32) or any(o.shape != b.shape for o, b in zip(o32, b32, strict=False)):
        return ModelErrorReport(False, "structure", "output structure differs from the baseline")
    outputs = _SetOutputs(o32, b32, b64)
    n = _finite_model_numbers(outputs, tolerance, abs_bound, facts or ReferenceFacts())
    if n is None:
        n = _plain_model_numbers(outputs, tolerance, abs_bound)
    if n.nonfinite:
        return ModelErrorReport(
            False, "structure", f"{n.nonfinite} non-finite outputs where the baseline is finite"
        )
    d_32, scale32, tol_pass = n.d_32, n.scale32, n.tol_pass
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
    d_ref, d_opt, scale = n.d_ref, n.d_opt, n.scale
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


@dataclass(frozen=True)
class _SetOutputs:
    """One input set's outputs: the candidate's, and the fp32 and float64 baselines'."""

    o32: list[torch.Tensor]
    b32: list[torch.Tensor]
    b64: list[torch.Tensor] | None


@dataclass
class _ModelNumbers:
    """What ``model_error_rule`` decides on; the float64 fields stay 0 without a float64 baseline."""

    nonfinite: int = 0  # non-finite outputs where the fp32 baseline is finite
    d_32: float = 0.0
    scale32: float = 0.0
    tol_pass: bool = False
    d_ref: float = 0.0
    d_opt: float = 0.0
    scale: float = 0.0


def _plain_model_numbers(outputs: _SetOutputs, tolerance: float, abs_bound: float) -> _ModelNumbers:
    """The rule's numbers over whole concatenated float64 copies, every rule spelled out."""
    o = _concat(outputs.o32)
    b = _concat(outputs.b32)
    nonfinite = int((~torch.isfinite(o) & torch.isfinite(b)).sum())
    if nonfinite:
        return _ModelNumbers(nonfinite=nonfinite)
    d_32 = _linf(o, b)
    scale32 = float(b[torch.isfinite(b)].abs().max()) if b.numel() else 0.0
    # Elementwise allclose at the strict tolerance, plus the same bound measured
    # against the output's magnitude so that tiny outputs cannot pass as zeros.
    tol_pass = _allclose(o, b, tolerance) and d_32 <= tolerance * scale32 + abs_bound
    n = _ModelNumbers(d_32=d_32, scale32=scale32, tol_pass=tol_pass)
    if outputs.b64 is None:
        return n
    r = _concat(outputs.b64)
    n.d_ref = _linf(b, r)
    n.d_opt = _linf(o, r)
    n.scale = float(r[torch.isfinite(r)].abs().max()) if r.numel() else 0.0
    return n


def _finite_model_numbers(
    outputs: _SetOutputs, tolerance: float, abs_bound: float, facts: ReferenceFacts
) -> _ModelNumbers | None:
    """``_plain_model_numbers`` leaf by leaf and chunk by chunk, when every value is finite.

    With finite values the NaN conventions of ``_linf`` and ``isclose`` never apply,
    and maxima over a concatenation are maxima over its pieces: one pass per leaf,
    the baselines' own numbers from ``facts``, ``|o32 - b32|`` from gate 2 when it
    compared this very output.  None (take the straightforward path) on anything else.
    """
    if not 0 <= tolerance < math.inf:
        return None
    leaves = _model_leaves(outputs, facts)
    if leaves is None:
        return None
    n = _ModelNumbers()
    close_later: list[tuple[torch.Tensor, torch.Tensor, LeafFacts, list[float]]] = []
    for o, b, r, leaf in leaves:
        maxima = leaf.recall_output(o)
        if maxima is None or r is not None:
            found = _model_pass(o, b, r, leaf, need_32=maxima is None)
            if found is None:
                return None
            maxima = maxima if maxima is not None else found[0]
            n.d_opt = max(n.d_opt, found[1])
        if r is not None:
            f64 = leaf.float64(b, r)
            n.d_ref, n.scale = max(n.d_ref, f64.d_ref), max(n.scale, f64.scale)
        n.d_32 = max([n.d_32, *maxima])
        n.scale32 = max(n.scale32, leaf.ref_max)
        close_later.append((o, b, leaf, maxima))
    n.tol_pass = n.d_32 <= tolerance * n.scale32 + abs_bound and all(
        _all_close(o, b, leaf, maxima, tolerance) for o, b, leaf, maxima in close_later
    )
    return n


def _model_leaves(
    outputs: _SetOutputs, facts: ReferenceFacts
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, LeafFacts]] | None:
    """The float leaves as (output, fp32 baseline, float64 baseline, facts), when all finite.

    None when the three lists do not pair up leaf by leaf as tensors of one shape
    (the concatenations would not line up the same way), or a baseline is not finite.
    """
    o32, b32, b64 = outputs.o32, outputs.b32, outputs.b64
    refs64: list[torch.Tensor | None] = list(b64) if b64 is not None else [None] * len(b32)
    if len(refs64) != len(b32):
        return None
    leaves = []
    for o, b, r in zip(o32, b32, refs64, strict=True):
        tensors = [t for t in (o, b, r) if t is not None]
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            return None
        if len({t.is_floating_point() for t in tensors}) != 1 or (
            r is not None and r.shape != b.shape
        ):
            return None
        if not b.is_floating_point():
            continue  # not compared (the concatenations keep float leaves only)
        leaf = facts.leaf(b, _CHUNK)
        if not leaf.finite or (r is not None and not leaf.float64(b, r).finite):
            return None
        leaves.append((o, b, r, leaf))
    return leaves


def _model_pass(
    o: torch.Tensor,
    b: torch.Tensor,
    r: torch.Tensor | None,
    leaf: LeafFacts,
    *,
    need_32: bool,
) -> tuple[list[float], float] | None:
    """Per chunk ``max |o - b|`` (if ``need_32``) and ``max |o - r|`` overall; None if not finite."""
    o_flat = o.detach().reshape(-1)
    b_flat = b.detach().reshape(-1)
    r_flat = r.detach().reshape(-1) if r is not None else None
    chunk, numel = leaf.chunk, o_flat.numel()
    maxima: list[float] = []
    d_opt = 0.0
    size = min(reference_facts.BLOCK, numel)
    with leaf.scratch.take(size, size, size, size) as (o_buf, b_buf, r_buf, d_buf):
        for start in range(0, numel, chunk):
            chunk_top = 0.0
            for begin, end in reference_facts.blocks(start, min(start + chunk, numel)):
                o64 = as_float64(o_flat[begin:end], o_buf)
                d = d_buf[: end - begin]
                if need_32:
                    top = finite_abs_max(
                        torch.sub(o64, as_float64(b_flat[begin:end], b_buf), out=d)
                    )
                    if top is None:
                        return None
                    chunk_top = max(chunk_top, top)
                if r_flat is not None:
                    top = finite_abs_max(
                        torch.sub(o64, as_float64(r_flat[begin:end], r_buf), out=d)
                    )
                    if top is None:
                        return None
                    d_opt = max(d_opt, top)
            maxima.append(chunk_top)
    return maxima, d_opt


def _all_close(
    o: torch.Tensor, b: torch.Tensor, leaf: LeafFacts, maxima: list[float], tolerance: float
) -> bool:
    """``isclose(o, b, rtol=atol=tolerance)`` everywhere, for finite values and ``0 <= tolerance < inf``.

    ``isclose`` allows ``tolerance + |tolerance * b| >= tolerance``: a chunk whose
    largest error is at most ``tolerance`` is close throughout.  Elsewhere it is
    the same arithmetic, without the equality and NaN terms: an equal pair has error
    0, within any allowance, and no value is NaN.
    """
    chunk, numel = leaf.chunk, o.numel()
    todo = [start for k, start in enumerate(range(0, numel, chunk)) if maxima[k] > tolerance]
    if not todo:
        return True
    o_flat, b_flat = o.detach().reshape(-1), b.detach().reshape(-1)
    size = min(reference_facts.BLOCK, numel)
    with leaf.scratch.take(size, size, size, size) as (o_buf, b_buf, d_buf, a_buf):
        for start in todo:
            for begin, end in reference_facts.blocks(start, min(start + chunk, numel)):
                o64 = as_float64(o_flat[begin:end], o_buf)
                b64 = as_float64(b_flat[begin:end], b_buf)
                actual = torch.sub(o64, b64, out=d_buf[: end - begin]).abs_()
                allowed = torch.mul(b64, tolerance, out=a_buf[: end - begin]).abs_().add_(tolerance)
                if bool(torch.gt(actual, allowed).any()):
                    return False
    return True
