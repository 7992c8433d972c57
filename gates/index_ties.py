"""Near-ties of the index ops a reference returns (argmax, argmin, max/min along a dim,
topk, sort, the order statistics median and kthvalue, the running cummax and cummin,
and the bin numbers of bucketize and searchsorted).

An index output is judged by equality, yet which of two nearly equal scores wins depends
on the precision the scores were computed in: an fp16 chain ties scores that float64
tells apart, and a compiler that keeps the chain in fp32 picks among them as neither
does.  The float64 run records each index op's scores, and for every returned index the
positions whose score lies within gate 2's tolerance of the one it chose (the extreme,
the median, or for topk, sort and kthvalue the k-th; for a running extreme, among the
positions up to its own) are kept as its alternates: an index equal to one of them
is excused as the float64 run's own answer is (``gates.numerics``).  A bin number is
judged the same way with the bins as its alternates: every bin that a value within
tolerance of the float64 run's would fall in.  The rule needs the
op's meaning, so it covers these ops alone; an index computed any other way is still
compared by equality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# op -> where the indices are among its outputs (None: it returns them alone), and where
# its dim is among the positional arguments and its default (None: over all elements)
_INDEX_OPS = {
    torch.ops.aten.argmax.default: (None, 1, None),
    torch.ops.aten.argmin.default: (None, 1, None),
    torch.ops.aten.max.dim: (1, 1, None),
    torch.ops.aten.min.dim: (1, 1, None),
    torch.ops.aten.topk.default: (1, 2, -1),
    torch.ops.aten.sort.default: (1, 1, -1),
    torch.ops.aten.sort.stable: (1, None, -1),  # dim is keyword-only
    torch.ops.aten.median.dim: (1, 1, None),
    torch.ops.aten.nanmedian.dim: (1, 1, None),
    torch.ops.aten.kthvalue.default: (1, 2, -1),
    torch.ops.aten.cummax.default: (1, 1, None),
    torch.ops.aten.cummin.default: (1, 1, None),
}
# running extremes: the index at position i names one of positions 0..i along the dim
_PREFIX_OPS = {torch.ops.aten.cummax.default, torch.ops.aten.cummin.default}
# bucketize(values, boundaries) and searchsorted(boundaries, values): where the values and
# the sorted boundaries stand among the positional arguments
_BIN_OPS = {
    torch.ops.aten.bucketize.Tensor: (0, 1),
    torch.ops.aten.searchsorted.Tensor: (1, 0),
}
MAX_ALTERNATES = 64  # positions kept per index: bounds the file where every score ties
# pairs kept per index output: a sort of millions of tied scores keeps the first this many
# (its later elements are compared by equality), so the file stays under 64 MB
MAX_PAIRS = 1 << 22
_CHUNK = 1 << 16  # tied indices expanded at once
_KEY = 1 << 32  # element * _KEY + position: one key per pair


@dataclass(frozen=True)
class IndexCall:
    """One index op of the float64 run: what it returned and what it chose among."""

    indices: torch.Tensor
    scores: torch.Tensor
    dim: int | None
    boundaries: torch.Tensor | None = None  # a bin op's: then ``scores`` are its values
    prefix: bool = False  # a running extreme's: slot i chose among positions 0..i


class IndexRecorder(TorchDispatchMode):
    """Records the index ops of a forward run under it (the float64 run's, once a set)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[IndexCall] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _INDEX_OPS and isinstance(args[0], torch.Tensor):
            position, dim_at, default = _INDEX_OPS[func]
            given = dim_at is not None and len(args) > dim_at
            dim = args[dim_at] if given else kwargs.get("dim", default)
            indices = out if position is None else out[position]
            self.calls.append(IndexCall(indices, args[0], dim, prefix=func in _PREFIX_OPS))
        elif func in _BIN_OPS:
            values, boundaries = (args[at] for at in _BIN_OPS[func])
            unsorted = kwargs.get("sorter") is not None  # boundaries in the sorter's order
            if isinstance(values, torch.Tensor) and not unsorted:
                self.calls.append(IndexCall(out, values, None, boundaries))
        return out


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.data_ptr() == b.data_ptr()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
    )


def _alternates(call: IndexCall, rtol: float, atol: float) -> torch.Tensor | None:
    """(element, position) pairs, a row each: for every returned index with near-ties, the
    positions whose score is within ``atol + rtol * |chosen|`` of the one it chose (at
    most ``MAX_ALTERNATES`` an element); None where no index has another within reach.

    Elements are flat positions in the index output; a reduction's output has the reduced
    dim dropped or kept as 1, topk's and sort's have their own length along it.  The near
    positions of a slot are one run of the row's scores in sorted order, found by binary
    search: a sort of a long row costs its sort, not every slot against every position.
    """
    scores = call.scores.detach()
    dim = call.dim
    if dim is None:  # over the flattened tensor
        scores, dim = scores.reshape(-1), 0
    if scores.dim() == 0 or scores.numel() == 0 or call.indices.numel() == 0:
        return None
    dim = dim % scores.dim()
    width = scores.shape[dim]
    slots = call.indices.numel() // (scores.numel() // width)  # indices a row returns
    shape = [slots if d == dim else n for d, n in enumerate(scores.shape)]
    chosen = call.indices.reshape(shape).long()
    elements = torch.arange(chosen.numel(), device=chosen.device).reshape(shape)
    rows = scores.movedim(dim, -1).reshape(-1, width).contiguous()
    best = scores.gather(dim, chosen).movedim(dim, -1).reshape(-1, slots).contiguous()
    ordered, order = rows.sort(dim=1)  # NaN last, -inf first: outside any finite reach
    reach = atol + rtol * best.abs()
    low = torch.searchsorted(ordered, (best - reach).contiguous())
    high = torch.searchsorted(ordered, (best + reach).contiguous(), right=True)
    high = torch.where(torch.isfinite(best), torch.minimum(high, low + MAX_ALTERNATES), low)
    row, slot = (high - low > 1).nonzero(as_tuple=True)  # each index with a tie
    if row.numel() == 0:
        return None

    def positions(run: torch.Tensor, taken: torch.Tensor) -> torch.Tensor:
        return order[row[run], taken]

    # slot i of a running extreme is position i along the dim: it chose among 0..i
    limit = slot if call.prefix else None
    flat = elements.movedim(dim, -1).reshape(-1, slots)[row, slot]
    return _pairs_of_runs(flat, low[row, slot], high[row, slot], positions, limit)


def _bins_within_reach(call: IndexCall, rtol: float, atol: float) -> torch.Tensor | None:
    """(element, bin) pairs: for each value within reach of a boundary, every bin of
    ``[value - reach, value + reach]`` (at most ``MAX_ALTERNATES``), where
    ``reach = atol + rtol * |value|``; the side a value on a boundary goes to is read back
    from the bin the op gave it, so ``right=`` needs no recording."""
    values = call.scores.detach()
    chosen = call.indices.reshape(-1).long()
    edges = call.boundaries.detach().to(values.dtype)  # one row, or one per row of values
    if values.numel() == 0 or edges.numel() == 0 or chosen.numel() != values.numel():
        return None
    reach = atol + rtol * values.abs()
    # the lowest and highest bin a value within reach could give, either side
    low = torch.searchsorted(edges, (values - reach).contiguous()).reshape(-1)
    high = torch.searchsorted(edges, (values + reach).contiguous(), right=True).reshape(-1)
    finite = torch.isfinite(values).reshape(-1)
    low = torch.minimum(low, chosen)
    stop = torch.where(finite, torch.maximum(high, chosen), chosen) + 1  # one past the last
    tied = (stop - low > 1).nonzero(as_tuple=True)[0]
    if tied.numel() == 0:
        return None
    return _pairs_of_runs(tied, low[tied], stop[tied], lambda _run, taken: taken)


def _pairs_of_runs(
    elements: torch.Tensor,
    start: torch.Tensor,
    stop: torch.Tensor,
    positions: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    limit: torch.Tensor | None = None,
) -> torch.Tensor:
    """(element, position) pairs sorted by key: element ``elements[r]`` may be any of
    ``positions(r, t)`` for ``t`` in its run ``[start[r], stop[r])`` (at most
    ``MAX_ALTERNATES`` a run), and at most ``limit[r]`` where a limit is given.  Runs are
    expanded a chunk at a time and the pairs stop at ``MAX_PAIRS``, as an output that ties
    almost everywhere (a sort of equal scores) would otherwise fill memory."""
    step = torch.arange(MAX_ALTERNATES, device=start.device)
    found, kept = [], 0
    for first in range(0, elements.numel(), _CHUNK):
        part = torch.arange(first, min(first + _CHUNK, elements.numel()), device=start.device)
        taken = start[part, None] + step
        which, offset = (taken < stop[part, None]).nonzero(as_tuple=True)
        run = part[which]
        at = positions(run, taken[which, offset])
        pairs = torch.stack([elements[run], at], 1)
        if limit is not None:
            pairs = pairs[at <= limit[run]]
        found.append(pairs[: MAX_PAIRS - kept])
        kept += len(found[-1])
        if kept >= MAX_PAIRS:
            break
    pairs = torch.cat(found)
    return pairs[torch.argsort(pairs[:, 0] * _KEY + pairs[:, 1])].cpu()


def index_ties(
    leaves: list[Any], calls: list[IndexCall], *, rtol: float, atol: float
) -> list[torch.Tensor | None] | None:
    """Per output leaf, its alternates where the leaf is an index op's result as returned
    (the same tensor, not a copy or a view of it); None when no leaf has any."""
    found: list[torch.Tensor | None] = []
    for leaf in leaves:
        alternates = None
        if isinstance(leaf, torch.Tensor) and not leaf.is_floating_point():
            for call in calls:
                if _same_tensor(leaf, call.indices):
                    if call.scores.is_floating_point():  # integer scores tie exactly
                        near = _alternates if call.boundaries is None else _bins_within_reach
                        alternates = near(call, rtol, atol)
                    break
        found.append(alternates)
    return found if any(a is not None for a in found) else None


def matches_alternate(
    got: torch.Tensor, elements: torch.Tensor, ties: torch.Tensor
) -> torch.Tensor:
    """Where ``got`` (values of an index leaf at flat ``elements``, any shape alike) is one
    of its element's alternates (``ties``: the pairs ``index_ties`` kept)."""
    got = got.double() if got.is_floating_point() else got.long()
    whole = (got >= 0) & (got < _KEY)  # a position, not garbage
    if got.is_floating_point():
        whole &= got == got.round()
    keys = elements.long() * _KEY + torch.where(whole, got, 0).long()
    return whole & torch.isin(keys, ties[:, 0] * _KEY + ties[:, 1])
