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

The comparisons run block by block over flat chunks, reusing the reference's own
numbers (``gates.reference_facts``); a block without NaN or inf (nearly every one)
needs no masks.  They give the verdicts, numbers and messages of the rules spelled
out over whole float64 copies, bit for bit (``tests/gates/test_numerics_fast.py``
holds them to golden reports written by those rules).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from gates import reference_facts
from gates.index_ties import matches_alternate
from gates.reference_facts import LeafFacts, ReferenceFacts, as_float64, finite_abs_max
from kernelopt.float_units import coarse_dtype, ulps

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
    excused: int = 0  # elements apart from the reference that the float64 reference excuses

    def as_dict(self) -> dict[str, Any]:
        """The report; ``excused`` only where the float64 reference excused an element, so
        every other report reads as it did before the excuse (the golden ones too)."""
        report = asdict(self)
        if not self.excused:
            del report["excused"]
        return report


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

    @property
    def excused(self) -> int:
        return sum(leaf.excused for leaf in self.leaves)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problem": self.problem,
            "leaves": [x.as_dict() for x in self.leaves],
        }


def _finite_float(value: float) -> float:
    return value if math.isfinite(value) else float("inf")


def _excused_leaf(
    found: TensorComparison,
    out: torch.Tensor,
    ref: torch.Tensor,
    ref64: torch.Tensor | None,
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
    ties: torch.Tensor | None = None,
) -> TensorComparison:
    """``found`` (a leaf compared by ``compare_tensor``) judged again where ``ref64``, the
    same model's float64 output, excuses elements (``float64_excused``): those count as
    exact, everything else as before.

    When only the scale-relative rule still fails (every element within tolerance, the
    largest errors of a few units in the last place near the output's peak), elements
    within tolerance that are as near float64 as eager's are excused as well: eager's own
    rounding is then what the rule measures.  An integer or boolean leaf (an argmax, a
    comparison of such a chain) is excused where it equals the float64 run's value, or,
    for an index op's result, one of the near-tied alternates ``ties`` it kept.
    """
    if found.ok or ref64 is None or not _excusable(found, ref, ref64):
        return found
    flat, flat_ref, flat64 = out.reshape(-1), ref.reshape(-1), ref64.reshape(-1)
    patched = flat_ref.clone()
    count = 0
    for only_apart in (True, False):
        if ref.is_floating_point():
            excused = float64_excused(
                flat, flat_ref, flat64, rtol=rtol, atol=atol, only_apart=only_apart
            )
        else:  # an integer or boolean: where it equals the float64 run's
            excused = flat == flat64
            if ties is not None:
                excused |= matches_alternate(flat, torch.arange(flat.numel()), ties)
        excused &= patched != flat  # not excused before, and apart from eager's
        count += int(excused.sum())
        patched[excused] = flat[excused]
        again = compare_tensor(
            found.index, out, patched.view(ref.shape), rtol=rtol, atol=atol, scale_tol=scale_tol
        )
        scale_only = not (again.mismatched or again.unwritten or again.nonfinite)
        if again.ok or not scale_only:
            break
    return replace(again, excused=count) if count else found


def _excusable(found: TensorComparison, ref: torch.Tensor, ref64: torch.Tensor) -> bool:
    """Whether a failed comparison is one of values (not of structure or unwritten
    elements) on a real leaf that ``ref64`` pairs with element by element: a float leaf
    with a float one, an integer or boolean leaf with one of its own dtype."""
    if found.shape != found.ref_shape or found.dtype != found.ref_dtype or found.unwritten:
        return False
    if ref.is_complex() or ref64.is_complex() or ref64.numel() != ref.numel():
        return False
    if ref.is_floating_point():
        return ref64.is_floating_point()
    return ref64.dtype == ref.dtype


def float64_excused(
    out: torch.Tensor,
    ref: torch.Tensor,
    ref64: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    dtype: torch.dtype | None = None,
    only_apart: bool = True,
) -> torch.Tensor:
    """The flat elements the float64 reference excuses: ``out`` is outside gate 2's
    tolerance of ``ref`` but finite, within that tolerance of the float64 value and no
    farther from it than ``ref`` is (or ``ref`` is not finite where the float64 value is).

    There the reference's own rounding put the two apart: a compiler that keeps an fp16
    chain's intermediates in fp32 is closer to the model's function than eager is.
    ``dtype``: the output's own (default ``ref``'s), for its units in the last place;
    ``only_apart`` False: elements within tolerance of ``ref`` qualify too.
    """
    coarse = coarse_dtype(dtype or ref.dtype, rtol)
    excused = torch.zeros(ref.numel(), dtype=torch.bool)
    for begin, end in reference_facts.blocks(0, ref.numel()):
        o, r, t = (x[begin:end].double() for x in (out, ref, ref64))
        known = torch.isfinite(t) & torch.isfinite(o)
        t0 = torch.where(known, t, 0.0)
        miss = (o - t0).abs()
        finite = torch.isfinite(r)
        r0 = torch.where(finite, r, 0.0)
        apart = ~finite | ((o - r0).abs() > _bound(r0, rtol, atol, coarse))
        theirs = torch.where(finite, (r0 - t0).abs(), math.inf)
        near = known & (miss <= _bound(t0, rtol, atol, coarse)) & (miss <= theirs)
        excused[begin:end] = near & apart if only_apart else near
    return excused


def _bound(r: torch.Tensor, rtol: float, atol: float, coarse: torch.dtype | None) -> torch.Tensor:
    """Gate 2's elementwise bound around finite values ``r`` (float64)."""
    bound = atol + rtol * r.abs()
    return bound if coarse is None else torch.maximum(bound, ulps(r, coarse))


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
    coarse = coarse_dtype(ref.dtype, rtol)
    if coarse is not None:  # one unit at the largest value is within the scale rule too
        scale_tol = max(scale_tol, torch.finfo(coarse).eps)
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
        out, ref = real_view(out), real_view(ref)
        base["numel"] = ref.numel()  # parts; a worst index ends in 0 (real) or 1 (imaginary)
        leaf = ReferenceFacts().leaf(ref, _CHUNK)
        st, _ = _float_stats(out, ref, rtol=rtol, atol=atol, facts=leaf)
    else:
        leaf = (facts or ReferenceFacts()).leaf(ref, _CHUNK)
        st, maxima = _float_stats(out, ref, rtol=rtol, atol=atol, facts=leaf, coarse=coarse)
        if maxima is not None:
            leaf.remember_output(source, maxima)
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
# in order (this fixes their last bits)
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
    out: torch.Tensor,
    ref: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    facts: LeafFacts,
    coarse: torch.dtype | None = None,
) -> tuple[_FloatStats, list[float] | None]:
    """Compare in float64 over flat chunks, block by block; every rule is elementwise or a sum.

    The error of an element is ``|out - ref|`` where both are finite, else 0.  A block
    whose differences are all finite needs no masks (nothing in it can be unwritten or
    non-finite); any other applies them (``_masked_block``).  Also returns ``max |out -
    ref|`` per chunk when every value was finite, for gate 3 (None otherwise).
    """
    st = _FloatStats(ref_max=facts.ref_max, ref_sq=facts.ref_sq)
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    chunk, numel = facts.chunk, r_flat.numel()
    maxima: list[float] | None = []
    worst: tuple[int, int] | None = None  # the first block holding max_err, searched last
    block = min(reference_facts.BLOCK, numel)
    with facts.scratch.take(block, block, block, block, min(chunk, numel)) as bufs:
        o_buf, r_buf, d_buf, t_buf, sq_buf = bufs
        for start in range(0, numel, chunk):
            top, finite = 0.0, True
            for begin, end in reference_facts.blocks(start, min(start + chunk, numel)):
                o64 = as_float64(o_flat[begin:end], o_buf)
                r64 = as_float64(r_flat[begin:end], r_buf)
                d = torch.sub(o64, r64, out=d_buf[: end - begin])
                block_top = finite_abs_max(d)
                if block_top is None:
                    block_top = _masked_block(st, o64, r64, d, rtol=rtol, atol=atol, coarse=coarse)
                    finite = False
                elif not (rtol >= 0 and block_top <= atol):
                    # an error of at most atol is within atol + rtol * |r|: no count needed
                    bound = torch.abs(r64, out=t_buf[: end - begin]).mul_(rtol).add_(atol)
                    if coarse is not None:
                        bound = torch.maximum(bound, ulps(r64, coarse))
                    st.mismatched += int(torch.gt(d.abs_(), bound).sum())
                torch.mul(d, d, out=sq_buf[begin - start : end - start])
                if block_top > st.max_err:  # strictly: an earlier element keeps a tie
                    st.max_err, worst = block_top, (begin, end)
                top = max(top, block_top)
            st.err_sq += float(sq_buf[: min(chunk, numel - start)].sum())
            if not finite:
                maxima = None
            elif maxima is not None:
                maxima.append(top)
        if worst is not None:
            st.worst_flat = worst[0] + _first_error(
                o_flat[worst[0] : worst[1]], r_flat[worst[0] : worst[1]], st.max_err, bufs
            )
    return st, maxima


def _masked_block(
    st: _FloatStats,
    o: torch.Tensor,
    r: torch.Tensor,
    d: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    coarse: torch.dtype | None = None,
) -> float:
    """Count a block holding NaN or inf (``d = o - r``, left holding the errors); its largest error.

    NaN where the reference is finite is poison (unwritten); inf there is non-finite; a
    non-finite reference value must be reproduced exactly (the same NaN or inf).
    """
    ref_finite = torch.isfinite(r)
    out_nan = torch.isnan(o)
    both = ref_finite & torch.isfinite(o)
    st.unwritten += int((out_nan & ref_finite).sum())
    st.nonfinite += int((~both & ~out_nan & ref_finite).sum())
    same = (o == r) | (out_nan & torch.isnan(r))
    st.special_bad += int((~ref_finite & ~same).sum())
    err = d.abs_().masked_fill_(~both, 0.0)
    bound = atol + rtol * r.abs()
    if coarse is not None:
        bound = torch.maximum(bound, ulps(torch.where(ref_finite, r, 0.0), coarse))
    bad = (~both | (err > bound)) & ref_finite  # non-finite refs: above
    st.mismatched += int(bad.sum())
    return float(err.max())


def _first_error(o: torch.Tensor, r: torch.Tensor, value: float, bufs: list[torch.Tensor]) -> int:
    """The first flat index of a block where the error (0 unless both finite) is ``value``."""
    o_buf, r_buf, d_buf = bufs[:3]
    o64, r64 = as_float64(o, o_buf), as_float64(r, r_buf)
    err = torch.sub(o64, r64, out=d_buf[: r.numel()]).abs_()
    err.masked_fill_(~(torch.isfinite(o64) & torch.isfinite(r64)), 0.0)
    hits = (err == value).nonzero()
    if not hits.numel():
        raise RuntimeError("the block's largest error is not in it")  # deterministic: never
    return int(hits[0, 0])


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


def scalar_tensor(value: float) -> torch.Tensor:
    """A Python float output (``.item()``) as the 0-d float64 tensor it came from at most."""
    return torch.tensor(float(value), dtype=torch.float64)


def real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a trailing axis of 2), else ``t``:
    both parts are compared, each as a float."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _tensor_leaf(value: Any) -> torch.Tensor | None:
    return value if isinstance(value, torch.Tensor) else None


def output_scale(leaves: list[Any], facts: ReferenceFacts) -> float:
    """The largest finite magnitude among an output's float leaves (complex: both parts)."""
    scale = 0.0
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex()):
            scale = max(scale, facts.leaf(real_view(leaf), _CHUNK).ref_max)
    return scale


def compare_outputs(
    outs: list[Any],
    refs: list[Any],
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
    facts: ReferenceFacts | None = None,
    refs64: list[Any] | None = None,
    ties64: list[Any] | None = None,
) -> OutputComparison:
    """Compare flattened output leaves; structure (count, tensor-ness) must match.

    ``facts`` (the bundle's) keeps the references' own numbers across candidates;
    ``refs64``, the float64 run's leaves, excuse what the reference's rounding put apart,
    and ``ties64`` the near-tied alternates of its index outputs (``gates.index_ties``).
    """
    paired = refs64 is not None and len(refs64) == len(refs)
    if len(outs) != len(refs):
        return OutputComparison(False, f"{len(outs)} outputs, expected {len(refs)}", [])
    leaves: list[TensorComparison] = []
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return OutputComparison(
                    False, f"output {i} is {type(o).__name__}, expected a tensor", leaves
                )
            out = o.detach().cpu()
            found = compare_tensor(
                i, out, r, rtol=rtol, atol=atol, scale_tol=scale_tol, facts=facts, source=o
            )
            r64 = _tensor_leaf(refs64[i]) if paired and refs64 is not None else None
            tie = (
                _tensor_leaf(ties64[i]) if r64 is not None and ties64 and i < len(ties64) else None
            )
            leaves.append(
                _excused_leaf(
                    found, out, r, r64, rtol=rtol, atol=atol, scale_tol=scale_tol, ties=tie
                )
            )
        elif isinstance(r, float) and isinstance(o, (float, int)) and not isinstance(o, bool):
            # a Python float (``.item()``): within tolerance, as a 0-d tensor would be
            scalar = compare_tensor(
                i, scalar_tensor(o), scalar_tensor(r), rtol=rtol, atol=atol, scale_tol=scale_tol
            )
            if not scalar.ok:
                return OutputComparison(
                    False, f"output {i} is {o!r}, expected {r!r} ({scalar.problem})", leaves
                )
        elif type(o) is bool or type(r) is bool:
            if o is not r:
                return OutputComparison(False, f"output {i} is {o!r}, expected {r!r}", leaves)
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


def _concat(leaves: list[torch.Tensor]) -> torch.Tensor:
    """The float leaves, flat, one after another in float64: the values the rule is stated on."""
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
    o32, b32 = [real_view(t) for t in o32], [real_view(t) for t in b32]
    b64 = [real_view(t) for t in b64] if b64 is not None else None
    if len(o32) != len(b32) or any(o.shape != b.shape for o, b in zip(o32, b32, strict=False)):
        return ModelErrorReport(False, "structure", "output structure differs from the baseline")
    n = _model_numbers(o32, b32, b64, tolerance, abs_bound, facts or ReferenceFacts())
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
class BaselineFloat64:
    """Gate 3's reference-only numbers for one input set, over the same leaves as the rule."""

    d_ref: float  # Linf(b32 - b64)
    scale: float  # Linf(b64) over its finite values
    scale32: float  # Linf(b32) over its finite values


def baseline_float64(
    b32: list[torch.Tensor], b64: list[torch.Tensor], facts: ReferenceFacts
) -> BaselineFloat64:
    """The numbers ``model_error_rule`` takes from the baselines alone, leaf by leaf as it does.

    A check that sees only some elements of an output can prove the rule fails there
    (its error maxima only grow with more elements) given these whole-output numbers.
    """
    b32 = [real_view(t) for t in b32]
    leaves = _leaves64(_leaves(b32, b32, facts), b32, b32, [real_view(t) for t in b64], facts)
    d_ref = scale = scale32 = 0.0
    for leaf in leaves:
        assert leaf.ref64 is not None
        f64 = leaf.facts.float64(leaf.ref, leaf.ref64)
        d_ref, scale = max(d_ref, f64.d_ref), max(scale, f64.scale)
        scale32 = max(scale32, leaf.facts.ref_max)
    return BaselineFloat64(d_ref=d_ref, scale=scale, scale32=scale32)


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


@dataclass(frozen=True)
class _Leaf:
    """One float leaf to compare: an output's and a baseline's values, flat, paired in order."""

    out: torch.Tensor
    ref: torch.Tensor
    facts: LeafFacts  # the fp32 baseline's
    source: torch.Tensor | None  # the caller's output object, which gate 2 may have compared
    ref64: torch.Tensor | None = None  # the float64 baseline's values, when paired


def _model_numbers(
    o32: list[torch.Tensor],
    b32: list[torch.Tensor],
    b64: list[torch.Tensor] | None,
    tolerance: float,
    abs_bound: float,
    facts: ReferenceFacts,
) -> _ModelNumbers:
    """The rule's numbers over the float leaves, leaf by leaf and chunk by chunk.

    The rule is stated over the float leaves concatenated (``_concat``); maxima over a
    concatenation are maxima over its pieces, so each leaf is compared on its own, the
    baselines' own numbers come from ``facts``, and ``|o32 - b32|`` from gate 2 when it
    compared this very output.  NaN against NaN is no error, any other NaN difference
    an infinite one.  The steps, and the errors some inputs raise, come in the order
    the rule always took them.
    """
    n = _ModelNumbers()
    leaves = _leaves(o32, b32, facts)
    maxima_32: list[list[float]] = []
    for leaf in leaves:
        maxima = leaf.facts.recall_output(leaf.source) if leaf.source is not None else None
        if maxima is None:
            maxima, nonfinite = _linf_chunks(leaf.out, leaf.ref, leaf.facts)
            n.nonfinite += nonfinite
        maxima_32.append(maxima)
        n.d_32 = max([n.d_32, *maxima])
        n.scale32 = max(n.scale32, leaf.facts.ref_max)
    if n.nonfinite:
        return n
    for leaf in leaves:
        _no_magnitude_raises(leaf.facts.numel, leaf.facts.any_finite)
    within = n.d_32 <= tolerance * n.scale32 + abs_bound
    if within or not _skips_close_chunks(tolerance):  # isclose raises on a bad tolerance
        close = all(
            _all_close(leaf, maxima, tolerance)
            for leaf, maxima in zip(leaves, maxima_32, strict=True)
        )
        n.tol_pass = close and within
    if b64 is None:
        return n
    leaves64 = _leaves64(leaves, o32, b32, b64, facts)
    for leaf in leaves64:
        assert leaf.ref64 is not None
        f64 = leaf.facts.float64(leaf.ref, leaf.ref64)
        maxima, _ = _linf_chunks(leaf.out, leaf.ref64, leaf.facts, baseline=leaf.ref)
        n.d_ref, n.d_opt = max(n.d_ref, f64.d_ref), max([n.d_opt, *maxima])
        n.scale = max(n.scale, f64.scale)
    for leaf in leaves64:
        assert leaf.ref64 is not None
        _no_magnitude_raises(leaf.facts.numel, leaf.facts.float64(leaf.ref, leaf.ref64).any_finite)
    return n


def _leaves(o32: list[torch.Tensor], b32: list[torch.Tensor], facts: ReferenceFacts) -> list[_Leaf]:
    """The float leaves of the output and the fp32 baseline, paired one by one.

    Odd case: where an output leaf is float and its baseline's is not (or the reverse)
    the leaves do not pair up; the rule then pairs the concatenations element by
    element, as far as they broadcast (a RuntimeError where they do not), as one leaf.
    """
    if all(o.is_floating_point() == b.is_floating_point() for o, b in zip(o32, b32, strict=True)):
        return [
            _Leaf(_flat(o), b, facts.leaf(b, _CHUNK), o)
            for o, b in zip(o32, b32, strict=True)
            if b.is_floating_point()
        ]
    out, ref = torch.broadcast_tensors(_concat(o32), _concat(b32))
    return [_Leaf(out, ref, facts.leaf(ref, _CHUNK), None)]


def _leaves64(
    leaves: list[_Leaf],
    o32: list[torch.Tensor],
    b32: list[torch.Tensor],
    b64: list[torch.Tensor],
    facts: ReferenceFacts,
) -> list[_Leaf]:
    """``leaves`` with the float64 baseline's values, leaf by leaf where they pair up.

    Odd case: a float64 baseline of another structure (other leaves, other sizes) is
    paired with the concatenations, as far as the three broadcast.
    """
    paired = (
        all(leaf.source is not None for leaf in leaves)
        and len(b64) == len(b32)
        and all(
            isinstance(r, torch.Tensor)
            and r.is_floating_point() == b.is_floating_point()
            and r.numel() == b.numel()
            for r, b in zip(b64, b32, strict=True)
        )
    )
    if paired:
        refs64 = [r for r, b in zip(b64, b32, strict=True) if b.is_floating_point()]
        return [
            _Leaf(leaf.out, leaf.ref, leaf.facts, leaf.source, r)
            for leaf, r in zip(leaves, refs64, strict=True)
        ]
    out, ref, ref64 = torch.broadcast_tensors(_concat(o32), _concat(b32), _concat(b64))
    return [_Leaf(out, ref, facts.leaf(ref, _CHUNK), None, ref64)]


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).cpu()


def _linf_chunks(
    x: torch.Tensor, y: torch.Tensor, facts: LeafFacts, baseline: torch.Tensor | None = None
) -> tuple[list[float], int]:
    flat = None if baseline is None else _flat(baseline)
    return reference_facts.linf_blocks(_flat(x), _flat(y), facts.chunk, facts.scratch, flat)


def _no_magnitude_raises(numel: int, any_finite: bool) -> None:
    """Odd case: a baseline with values but no finite one has no magnitude.

    The rule takes the largest finite value, which raised here; so it still does.
    """
    if numel and not any_finite:
        raise RuntimeError("the baseline has no finite value to take the magnitude of")


def _skips_close_chunks(tolerance: float) -> bool:
    """A chunk whose largest error is at most ``tolerance`` is close throughout.

    ``isclose`` allows ``tolerance + |tolerance * b| >= tolerance`` when ``0 <= tolerance
    < inf``; it refuses a negative or NaN one, and an infinite one allows NaN at b = 0.
    """
    return 0 <= tolerance < math.inf


def _all_close(leaf: _Leaf, maxima: list[float], tolerance: float) -> bool:
    """``isclose(out, ref, rtol=atol=tolerance, equal_nan=True)`` everywhere in the leaf.

    Chunks whose largest error is at most ``tolerance`` are skipped where that proves
    them close.  A chunk whose differences are finite (NaN against NaN aside) gets the
    same arithmetic without the equality and NaN terms: an equal pair has error 0,
    within any allowance, and a NaN pair is never counted.  Any other chunk, or any
    chunk under a tolerance ``isclose`` treats otherwise, gets ``isclose`` itself.
    """
    chunk, numel = leaf.facts.chunk, leaf.out.numel()
    skips = _skips_close_chunks(tolerance)
    todo = [
        (start, math.isfinite(maxima[k]) and skips)
        for k, start in enumerate(range(0, numel, chunk))
        if not (skips and maxima[k] <= tolerance)
    ]
    if not todo:
        return True
    o_flat, b_flat = _flat(leaf.out), _flat(leaf.ref)
    size = min(reference_facts.BLOCK, numel)
    with leaf.facts.scratch.take(size, size, size, size) as (o_buf, b_buf, d_buf, a_buf):
        for start, finite in todo:
            for begin, end in reference_facts.blocks(start, min(start + chunk, numel)):
                o64 = as_float64(o_flat[begin:end], o_buf)
                b64 = as_float64(b_flat[begin:end], b_buf)
                if not finite:
                    close = torch.isclose(o64, b64, rtol=tolerance, atol=tolerance, equal_nan=True)
                    if not bool(close.all()):
                        return False
                    continue
                actual = torch.sub(o64, b64, out=d_buf[: end - begin]).abs_()
                allowed = torch.mul(b64, tolerance, out=a_buf[: end - begin]).abs_().add_(tolerance)
                if bool(torch.gt(actual, allowed).any()):
                    return False
    return True
