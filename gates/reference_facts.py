"""Reference-only numbers of gates 2 and 3, computed once per reference output and reused.

Besides the candidate's error, the comparisons need quantities that depend on the
reference alone: where it is finite, its magnitude and sum of squares, the fp32
baseline's own distance to float64.  Every candidate compared with one reference
bundle shares them, so they are computed on first use and kept with the bundle, in
the parent's memory, where no candidate process can reach them.

An entry describes one tensor object at one version of its contents: a reference
output replaced by another tensor, or changed in place through torch (which bumps
its version counter), is described afresh instead of reusing stale numbers.  Entries
hold weak references only, so the cache never keeps a reference output alive.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch


def _fingerprint(t: torch.Tensor) -> tuple[object, ...]:
    """What must stay the same for numbers about ``t`` to stay true (besides identity)."""
    return (t._version, t.data_ptr(), tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)


# elements per block of the chunked passes: a few float64 blocks (2 MiB each) stay in the
# CPU's caches between one operation and the next, where 1M-element ones do not
BLOCK = 1 << 18


def blocks(start: int, end: int) -> Iterator[tuple[int, int]]:
    """``(begin, end)`` of the blocks that cover ``[start, end)``, in order."""
    for begin in range(start, end, BLOCK):
        yield begin, min(begin + BLOCK, end)


def as_float64(t: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """``t`` in float64: itself when it already is, else converted into ``scratch``."""
    if t.dtype == torch.float64:
        return t
    return scratch[: t.numel()].copy_(t)


def finite_abs_max(t: torch.Tensor) -> float | None:
    """``max |t|`` when every element is finite (one pass), else None."""
    if t.numel() == 0:
        return 0.0
    lo, hi = torch.aminmax(t)
    low, high = float(lo), float(hi)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return max(high, -low)


def _empty(size: int) -> torch.Tensor:
    return torch.empty(max(size, 1), dtype=torch.float64)


class ScratchPool:
    """Float64 buffers reused from one comparison to the next.

    A fresh buffer of megabytes is faulted in page by page, which costs more than
    the arithmetic done in it; one caller at a time gets the kept buffers, a
    concurrent one gets fresh buffers (the same numbers, only slower).
    """

    _KEEP = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: list[torch.Tensor] = []

    @contextmanager
    def take(self, *sizes: int) -> Iterator[list[torch.Tensor]]:
        """Float64 buffers of at least ``sizes`` elements, lent for the ``with`` block."""
        if not self._lock.acquire(blocking=False):
            yield [_empty(n) for n in sizes]
            return
        try:
            free = sorted(self._buffers, key=lambda b: b.numel())  # the smallest that fits
            given: dict[int, torch.Tensor] = {}
            for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
                fit = next((j for j, b in enumerate(free) if b.numel() >= sizes[i]), None)
                given[i] = free.pop(fit) if fit is not None else _empty(sizes[i])
            lent = [given[i] for i in range(len(sizes))]
            kept = sorted([*lent, *free], key=lambda b: -b.numel())
            self._buffers = kept[: max(self._KEEP, len(lent))]
            yield lent
        finally:
            self._lock.release()


def finite_values_max(x: torch.Tensor) -> tuple[float, bool]:
    """``(max |x| over its finite values or 0, whether it has one)`` of a float64 block."""
    top = finite_abs_max(x)
    if top is not None:
        return top, x.numel() > 0
    finite = torch.isfinite(x)
    return float(torch.where(finite, x, 0.0).abs().max()), bool(finite.any())


def _max_and_square_sum(
    x: torch.Tensor, x_buf: torch.Tensor, sq_buf: torch.Tensor
) -> tuple[float, float, bool]:
    """``(max |x|, sum of x**2, any finite)`` of one chunk, non-finite values taken as zero.

    Block by block, the squares kept for one torch sum over the whole chunk: the same
    sum, bit for bit, as squaring and summing the chunk at once.
    """
    top, any_finite = 0.0, False
    for begin, end in blocks(0, x.numel()):
        b = as_float64(x[begin:end], x_buf)
        block_top = finite_abs_max(b)
        if block_top is None:  # NaN or inf here: they count as zero, as the rule always had it
            finite = torch.isfinite(b)
            any_finite = any_finite or bool(finite.any())
            b = torch.where(finite, b, 0.0)
            block_top = float(b.abs().max())
        else:
            any_finite = True
        top = max(top, block_top)
        torch.mul(b, b, out=sq_buf[begin:end])
    return top, float(sq_buf[: x.numel()].sum()), any_finite


def linf_blocks(
    x: torch.Tensor,
    y: torch.Tensor,
    chunk: int,
    scratch: ScratchPool,
    baseline: torch.Tensor | None = None,
) -> tuple[list[float], int]:
    """Per chunk ``max |x - y|`` of two flat tensors, and the non-finite ``x`` where ``y`` is finite.

    Values that agree are no error, non-finite ones included (NaN against NaN, an
    infinity against the same infinity); any other NaN difference is an infinite one:
    gate 3's rule, whose maxima over pieces are its maximum over the whole.  With
    ``baseline`` (the fp32 baseline, when ``y`` is the float64 one), a position where the
    baseline is not finite and ``x`` reproduces it is no error either: there the
    baseline's own error is unbounded, and an output that overflows exactly as the
    compiler's does is neither better nor worse than it.
    """
    numel = x.numel()
    maxima: list[float] = []
    nonfinite = 0
    size = min(BLOCK, numel)
    with scratch.take(size, size, size, size if baseline is not None else 0) as bufs:
        x_buf, y_buf, d_buf, b_buf = bufs
        for start in range(0, numel, chunk):
            top = 0.0
            for begin, end in blocks(start, min(start + chunk, numel)):
                x64, y64 = as_float64(x[begin:end], x_buf), as_float64(y[begin:end], y_buf)
                d = torch.sub(x64, y64, out=d_buf[: end - begin])
                block_top = finite_abs_max(d)
                if block_top is None:  # NaN or inf in the block: the masks
                    nonfinite += int((~torch.isfinite(x64) & torch.isfinite(y64)).sum())
                    b64 = None if baseline is None else as_float64(baseline[begin:end], b_buf)
                    block_top = _linf_non_finite(x64, y64, d, b64)
                top = max(top, block_top)
            maxima.append(top)
    return maxima, nonfinite


def _agrees(x64: torch.Tensor, y64: torch.Tensor) -> torch.Tensor:
    """Where two blocks hold the same value, NaN against NaN included."""
    return (x64 == y64) | (torch.isnan(x64) & torch.isnan(y64))


def _linf_non_finite(
    x64: torch.Tensor, y64: torch.Tensor, d: torch.Tensor, b64: torch.Tensor | None
) -> float:
    """``max |d|`` of a block ``d = x - y`` holding NaN or inf, agreeing values counting 0."""
    agree = _agrees(x64, y64)
    if b64 is not None:
        agree |= ~torch.isfinite(b64) & _agrees(x64, b64)
    d = d.abs_().masked_fill_(agree, 0.0)
    if bool(torch.isnan(d).any()):
        return math.inf
    return float(d.max())


@dataclass(frozen=True)
class Float64Facts:
    """The float64 baseline of one fp32 reference leaf: gate 3's reference-only numbers."""

    scale: float = 0.0  # Linf(b64) over its finite values
    any_finite: bool = False  # b64 has a finite value (a scale to speak of)
    d_ref: float = 0.0  # Linf(b32 - b64): the fp32 baseline's own rounding error


class LeafFacts:
    """One fp32 reference leaf's numbers, chunk by chunk as gate 2 compares it.

    ``ref_max`` and ``ref_sq`` are summed exactly as gate 2 always summed them (the
    same chunks, the same order), so the numbers reported do not move by an ulp.
    """

    def __init__(self, ref: torch.Tensor, chunk: int, scratch: ScratchPool) -> None:
        self._ref = weakref.ref(ref)
        self.scratch = scratch
        self._fingerprint = _fingerprint(ref)
        self.chunk = chunk
        self.numel = ref.numel()
        self.ref_max = 0.0  # max |ref| over finite values
        self.ref_sq = 0.0  # sum of squares of finite values, chunk sums added in order
        self.any_finite = False  # ref has a finite value
        self._float64: tuple[weakref.ref[torch.Tensor], tuple[object, ...], Float64Facts] | None = (
            None
        )
        self._last_output: (
            tuple[weakref.ref[torch.Tensor], tuple[object, ...], list[float]] | None
        ) = None
        flat = ref.detach().reshape(-1)
        with scratch.take(min(BLOCK, self.numel), min(chunk, self.numel)) as (r_buf, sq_buf):
            for start in range(0, self.numel, chunk):
                top, sq, any_finite = _max_and_square_sum(
                    flat[start : start + chunk], r_buf, sq_buf
                )
                self.ref_max = max(self.ref_max, top)
                self.ref_sq += sq
                self.any_finite = self.any_finite or any_finite

    def describes(self, ref: torch.Tensor, chunk: int) -> bool:
        """True while ``ref`` is the very tensor these numbers were computed from, unchanged."""
        return self._ref() is ref and chunk == self.chunk and _fingerprint(ref) == self._fingerprint

    def float64(self, ref: torch.Tensor, ref64: torch.Tensor) -> Float64Facts:
        """Gate 3's numbers against the float64 baseline ``ref64`` of this leaf (cached).

        ``ref64`` holds as many values as ``ref``; they are paired in row-major order.
        """
        kept = self._float64
        if kept is not None and kept[0]() is ref64 and kept[1] == _fingerprint(ref64):
            return kept[2]
        facts = self._compute_float64(ref, ref64)
        self._float64 = (weakref.ref(ref64), _fingerprint(ref64), facts)
        return facts

    def _compute_float64(self, ref: torch.Tensor, ref64: torch.Tensor) -> Float64Facts:
        flat32, flat64 = ref.detach().reshape(-1), ref64.detach().reshape(-1)
        maxima, _ = linf_blocks(flat32, flat64, self.chunk, self.scratch, baseline=flat32)
        scale, any_finite = 0.0, False
        with self.scratch.take(min(BLOCK, self.numel)) as (r_buf,):
            for begin, end in blocks(0, self.numel):
                top, finite = finite_values_max(as_float64(flat64[begin:end], r_buf))
                scale, any_finite = max(scale, top), any_finite or finite
        return Float64Facts(scale=scale, any_finite=any_finite, d_ref=max(maxima, default=0.0))

    def remember_output(self, out: torch.Tensor, chunk_maxima: list[float]) -> None:
        """Gate 2 found these ``max |out - ref|`` per chunk, every value finite; gate 3 reuses them."""
        self._last_output = (weakref.ref(out), _fingerprint(out), chunk_maxima)

    def recall_output(self, out: torch.Tensor) -> list[float] | None:
        """The per-chunk maxima gate 2 found for this very output tensor, unchanged since."""
        kept = self._last_output
        if kept is None or kept[0]() is not out or kept[1] != _fingerprint(out):
            return None
        return kept[2]


class ReferenceFacts:
    """The facts of every reference leaf compared so far, looked up by the leaf itself.

    One per reference bundle (``ReferenceBundle.facts``); a comparison given none
    computes the facts it needs for itself, with the same result.
    """

    def __init__(self) -> None:
        self._leaves: dict[int, LeafFacts] = {}
        self._lock = threading.Lock()  # the table only; facts are computed outside it
        self.scratch = ScratchPool()

    def __repr__(self) -> str:
        return f"ReferenceFacts({len(self._leaves)} leaves)"

    def leaf(self, ref: torch.Tensor, chunk: int) -> LeafFacts:
        """The facts of ``ref`` (a real floating-point tensor), computed on first use."""
        with self._lock:
            facts = self._leaves.get(id(ref))
        if facts is not None and facts.describes(ref, chunk):
            return facts
        facts = LeafFacts(ref, chunk, self.scratch)
        with self._lock:
            # an entry whose tensor is gone can never be hit again: drop it
            self._leaves = {k: v for k, v in self._leaves.items() if v._ref() is not None}
            self._leaves[id(ref)] = facts
        return facts
