"""Every timed call is a checked call (inside a child; see gates/README.md, "Checked timing").

A timing child that never looks at outputs can be fooled by any kernel that
behaves differently once it believes it is being timed.  So the timing loop
calls the model only through ``CheckedCalls``:

* inputs rotate: before every call the values of another input set (each with
  a reference answer) are copied into one of two input buffers, so no memo
  keyed on identity, pointer, version counter or shape can return a right
  answer;
* every output leaf must be a plain ``torch.Tensor`` on the expected device,
  with the reference's shape and dtype, and must not share memory with an
  input unless the reference's does;
* after every call, off the clock, ``samples`` elements at positions drawn
  from ``os.urandom`` *after* the call returned are copied aside (their
  reference values are compared in the parent), and a reservoir keeps whole
  outputs of a few calls chosen uniformly at random, also after the fact.
  ``record_batch`` does the same for a batch of calls after its last call
  returned, with one draw and a few launches per leaf instead of several per
  call (a dispatch-bound forward's records otherwise dominate a turn).

The candidate may learn which positions were drawn for past calls; it cannot
know them for the call it is computing.  Comparisons happen in the parent,
which alone holds the reference outputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gates.numerics import real_view
from gates.problem_io import flatten_output
from gates.protocol import OutputLeaf

_urandom = os.urandom  # captured before any candidate code is imported
# the torch functions that draw, gather and save the records, captured likewise: a
# candidate that replaces ``torch.save`` or ``torch.randint`` changes none of these
_randint, _gather, _stack, _tensor, _save = (
    torch.randint,
    torch.gather,
    torch.stack,
    torch.tensor,
    torch.save,
)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_MAX_PROBLEMS = 8
_RESERVOIR_BYTES = 1 << 30  # whole outputs kept at most (device memory)
# a batch's outputs of one leaf up to this size are stacked and gathered in one launch;
# beyond it each call is gathered alone (the forward is then long next to its record)
_STACK_BYTES = 64 << 20


def _random_below(n: int) -> int:
    return int.from_bytes(_urandom(8), "little") % n


def _span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def shares_memory(out: torch.Tensor, inputs: list[Any]) -> bool:
    """True if ``out``'s storage overlaps any input tensor's storage."""
    span = _own_span(out)
    return span is not None and _overlaps(span, _input_spans(inputs))


def _input_spans(inputs: list[Any]) -> list[tuple[int, int]]:
    """The storage spans of the inputs: found once per call, not once per output leaf."""
    return [
        _span(x) for x in inputs if isinstance(x, torch.Tensor) and x.untyped_storage().nbytes() > 0
    ]


def _own_span(out: torch.Tensor) -> tuple[int, int] | None:
    """``out``'s storage span, None where it has no memory (meta, empty): nothing to share."""
    if out.device.type == "meta" or out.untyped_storage().nbytes() == 0:
        return None
    return _span(out)


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    lo, hi = span
    return any(a < hi and lo < b for a, b in spans)


def output_problem(out: Any, expected: list[OutputLeaf], device: str, inputs: list[Any]) -> str:
    """Why ``out`` is not a plain, materialised, fresh output ('' when it is)."""
    leaves = flatten_output(out)
    return leaves_problem(leaves, expected, device, inputs)


def leaves_problem(
    leaves: list[Any], expected: list[OutputLeaf], device: str, inputs: list[Any]
) -> str:
    """``output_problem`` on an output already flattened (the records flatten it once)."""
    if len(leaves) != len(expected):
        return f"{len(leaves)} output leaves, the reference returns {len(expected)}"
    want_device = torch.device(device).type
    spans: list[tuple[int, int]] | None = None
    for i, (leaf, spec) in enumerate(zip(leaves, expected, strict=True)):
        if spec.shape is None:
            continue  # a scalar or None leaf: compared by value in the parent
        if type(leaf) not in _PLAIN:
            return (
                f"output {i} is a {type(leaf).__module__}.{type(leaf).__qualname__}, "
                "not a plain torch.Tensor (no subclasses, wrappers or lazy objects)"
            )
        if leaf.device.type != (spec.device or want_device):
            return f"output {i} is on {leaf.device}, expected {spec.device or want_device}"
        if spec.varying and leaf.dim() != len(spec.shape):
            return f"output {i} has {leaf.dim()} dimensions, expected {len(spec.shape)}"
        if not spec.varying and list(leaf.shape) != spec.shape:
            return f"output {i} has shape {list(leaf.shape)}, expected {spec.shape}"
        if spec.dtype is not None and str(leaf.dtype).removeprefix("torch.") != spec.dtype:
            return f"output {i} has dtype {leaf.dtype}, expected {spec.dtype}"
        own = None if spec.may_alias else _own_span(leaf)
        if own is None:
            continue
        spans = _input_spans(inputs) if spans is None else spans
        if _overlaps(own, spans):
            return (
                f"output {i} shares memory with an input, where the reference returns fresh "
                "memory (writing into the input afterwards would change the result)"
            )
    return ""


def output_bytes(expected: list[OutputLeaf]) -> int:
    """The bytes of one call's tensor outputs, as the reference returned them."""
    return sum(
        _numel(s.shape) * torch.empty((), dtype=getattr(torch, s.dtype)).element_size()
        for s in expected
        if s.shape is not None and s.dtype is not None
    )


def held_calls(expected: list[OutputLeaf], budget_bytes: int) -> int:
    """How many calls a host batch or a turn may make: it holds every call's outputs until
    its records, and back-to-back calls of a large, fast output would fill the device."""
    return max(1, budget_bytes // max(1, output_bytes(expected)))


class RotatingInputs:
    """Two input buffers that get another set's values copied in before every call.

    First-sight sets are no part of it: they come later (``gates.first_sight``) and are
    given once each, by ``give``, into the same buffers.
    """

    def __init__(self, value_sets: list[list[Any]], slots: int = 2) -> None:
        self.rotating = list(range(len(value_sets)))
        if not self.rotating:
            raise ValueError("at least one input set must rotate")
        self.sources = value_sets
        picks = [self.rotating[i % len(self.rotating)] for i in range(slots)]
        self.slots = [[_clone(v) for v in value_sets[k]] for k in picks]
        self.held = picks
        self.turn = 0

    def next(self) -> tuple[int, list[Any]]:
        """(set index, the buffers to call with): new values in the next buffer."""
        slot = self.turn % len(self.slots)
        n = len(self.rotating)
        choice = _random_below(n)
        if n > 1 and self.rotating[choice] == self.held[slot]:
            choice = (choice + 1 + _random_below(n - 1)) % n  # always a change of values
        return self._load(slot, self.rotating[choice])

    def give(self, k: int, values: list[Any]) -> tuple[int, list[Any]]:
        """(``k``, the next buffer with ``values`` copied in): a set from outside the rotation,
        numbered ``k`` by the caller (after the rotation's own)."""
        return self._load(self.turn % len(self.slots), k, values)

    def _load(self, slot: int, k: int, values: list[Any] | None = None) -> tuple[int, list[Any]]:
        self.turn += 1
        for dst, src in zip(
            self.slots[slot], self.sources[k] if values is None else values, strict=True
        ):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)  # new values, same pointer, new version counter
        self.held[slot] = k
        return k, self.slots[slot]

    def fixed(self, slot: int) -> tuple[int, list[Any]]:
        """A buffer as it is (no copy): for back-to-back host batches."""
        return self.held[slot], self.slots[slot]


def _clone(v: Any) -> Any:
    return v.clone() if isinstance(v, torch.Tensor) else v


@dataclass
class CheckedCalls:
    """Records what the parent needs to check every call: samples, problems, a reservoir."""

    expected: list[OutputLeaf]
    device: str
    samples: int = 128
    reservoir: int = 2
    calls: int = 0
    sets: list[int] = field(default_factory=list)
    # per leaf, in call order: one call's row (record) or several calls' rows (record_batch)
    positions: list[list[torch.Tensor]] = field(default_factory=list)
    values: list[list[torch.Tensor]] = field(default_factory=list)
    valid: list[list[bool]] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    kept: list[tuple[int, int, list[Any]]] = field(default_factory=list)  # (call, set, leaves)
    # before a call on set k: state restored, RNGs seeded (gates.call_policy); callers run
    # it off the clock.  None: the model needs nothing prepared.
    prepare: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        # the leaves ``hold`` clones, read once: it runs inside the timed batches
        self._shared = [spec.may_alias or spec.holds_state for spec in self.expected]
        self.positions = [[] for _ in self.expected]
        self.values = [[] for _ in self.expected]
        self.valid = [[] for _ in self.expected]
        self._gen = torch.Generator(device=self.device)
        self._no_positions = torch.zeros(self.samples, dtype=torch.long, device=self.device)
        self._no_values = torch.full(
            (self.samples,), float("nan"), dtype=torch.float64, device=self.device
        )
        out_bytes = output_bytes(self.expected)
        if out_bytes * self.reservoir > _RESERVOIR_BYTES:
            self.reservoir = int(_RESERVOIR_BYTES // max(1, out_bytes))

    def before(self, set_index: int) -> None:
        """Prepare a call on ``set_index`` as the reference's was (outside any timed window)."""
        if self.prepare is not None:
            self.prepare(set_index)

    def call(self, fn: Callable[..., Any], set_index: int, inputs: list[Any]) -> Any:
        """One call through the checked path; the output is recorded, then returned."""
        self.before(set_index)
        out = fn(*inputs)
        self.record(out, set_index, inputs)
        return out

    def record(self, out: Any, set_index: int, inputs: list[Any]) -> None:
        """Record one call that has returned: its structure checked, samples drawn now."""
        index = self.calls
        leaves = self._checked(out, set_index, inputs)
        if leaves is None:
            for j in range(len(self.expected)):
                self._skip(j)
            return
        self._gen.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        for j, (leaf, spec) in enumerate(zip(leaves, self.expected, strict=True)):
            if spec.shape is None or leaf.numel() == 0:
                self._skip(j)
                continue
            flat = _parts(leaf).reshape(-1)
            here = self._gen.device  # every record lives here, whatever the leaf's device
            where = _randint(0, flat.numel(), (self.samples,), generator=self._gen, device=here)
            self.positions[j].append(where)
            self.values[j].append(flat[where.to(flat.device)].to(here, torch.float64))
            self.valid[j].append(True)
        self._keep(index, set_index, leaves)

    def hold(self, out: Any) -> Any:
        """What a batch keeps of a call's output until its records.

        The output itself, unless the reference's output may alias an input or a tensor
        the model keeps: the next calls' copies, their state restores and their own
        in-place writes change that memory before the batch is recorded, so each such
        leaf is cloned now (on both sides alike: the reference decides, not the call).
        """
        if not any(self._shared):
            return out
        leaves = _leaves(out)
        if len(leaves) != len(self._shared):
            return out  # the records name the structure problem
        return _Held(
            [
                leaf.clone() if copy and isinstance(leaf, torch.Tensor) else leaf
                for leaf, copy in zip(leaves, self._shared, strict=True)
            ]
        )

    def record_batch(self, outs: list[tuple[Any, int, list[Any]]]) -> None:
        """Record calls that have all returned, each as ``record`` would, in one pass.

        ``outs`` holds (output, set index, inputs) in call order.  Every call is
        checked alone; the positions of all of them are drawn only now, from one
        seed, one draw per leaf, and gathered with a few launches, so the record
        of a dispatch-bound forward costs little next to the forward.
        """
        first = self.calls
        flat = [self._checked(out, set_index, inputs) for out, set_index, inputs in outs]
        if any(leaves is not None for leaves in flat):
            self._gen.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        pieces = _runs(flat)
        with torch.no_grad():
            for j, spec in enumerate(self.expected):
                self._sample_leaf(j, spec, flat, pieces)
        self._keep_batch(first, [set_index for _, set_index, _ in outs], flat)

    def _checked(self, out: Any, set_index: int, inputs: list[Any]) -> list[Any] | None:
        """Count the call and check its structure: its leaves, or None (a problem noted)."""
        index = self.calls
        self.calls += 1
        self.sets.append(set_index)
        if not self.expected:  # no reference structure given (probes): the first call's
            self._learn(out)
        leaves = out.leaves if isinstance(out, _Held) else _leaves(out)
        problem = leaves_problem(leaves, self.expected, self.device, inputs)
        if not problem:
            return leaves
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append((index, problem))
        return None

    def _sample_leaf(
        self,
        j: int,
        spec: OutputLeaf,
        flat: list[list[Any] | None],
        pieces: list[tuple[int, int] | None],
    ) -> None:
        """Leaf ``j`` of every call in a batch: one draw, blocks of rows in call order.

        A call is skipped as ``record`` skips it (a problem, a scalar or empty leaf);
        the others' rows are kept as slices of the batch's tensors, not one view per
        call, which would cost more than the draw.
        """
        rows = [leaves[j] for leaves in flat if leaves is not None]
        numel = _numel(spec.shape) if spec.shape is not None else 0
        if spec.dtype is not None and spec.dtype.startswith("complex"):
            numel *= 2  # real and imaginary parts, sampled alike (``_parts``)
        if spec.varying and rows:  # sizes differ from call to call: each drawn on its own
            self._sample_each(j, flat)
            return
        if not rows or numel == 0:
            for _ in flat:
                self._skip(j)
            return
        here = self._gen.device  # every record lives here, whatever the leaf's device
        where = _randint(0, numel, (len(rows), self.samples), generator=self._gen, device=here)
        values = _gathered([_parts(r) for r in rows], where)
        for piece in pieces:
            if piece is None:
                self._skip(j)
                continue
            a, b = piece
            self.positions[j].append(where[a:b])
            self.values[j].append(values[a:b])
            self.valid[j].extend([True] * (b - a))

    def _sample_each(self, j: int, flat: list[list[Any] | None]) -> None:
        """Leaf ``j`` of every call in a batch, drawn call by call as ``record`` draws it."""
        here = self._gen.device
        for leaves in flat:
            leaf = leaves[j] if leaves is not None else None
            if leaf is None or leaf.numel() == 0:
                self._skip(j)
                continue
            values = _parts(leaf).reshape(-1)
            where = _randint(0, values.numel(), (self.samples,), generator=self._gen, device=here)
            self.positions[j].append(where)
            self.values[j].append(values[where.to(values.device)].to(here, torch.float64))
            self.valid[j].append(True)

    def _keep_batch(self, first: int, sets: list[int], flat: list[list[Any] | None]) -> None:
        """``_keep`` for each call of a batch in turn, copying only the calls still kept at its end.

        The draws are ``_keep``'s (one per call once the reservoir is full, made now,
        after every call returned), so each call is as likely to be kept as before.
        """
        if self.reservoir <= 0:
            return
        slots: list[tuple[int, int, list[Any]] | int] = list(self.kept)  # int: a batch call
        calls = {i: leaves for i, leaves in enumerate(flat) if leaves is not None}
        draws = _urandom(8 * max(0, len(slots) + len(calls) - self.reservoir))
        d = 0
        for i in calls:
            if len(slots) < self.reservoir:
                slots.append(i)
                continue
            slot = int.from_bytes(draws[d : d + 8], "little") % (first + i + 1)
            d += 8
            if slot < self.reservoir:
                slots[slot] = i
        self.kept = [
            (first + s, sets[s], _copied(calls[s])) if isinstance(s, int) else s for s in slots
        ]

    def _learn(self, out: Any) -> None:
        leaves = flatten_output(out)
        self.expected = [
            OutputLeaf(shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch."))
            if isinstance(x, torch.Tensor)
            else OutputLeaf(shape=None, dtype=None)
            for x in leaves
        ]
        self.positions = [[] for _ in self.expected]
        self.values = [[] for _ in self.expected]
        self.valid = [[] for _ in self.expected]

    def _skip(self, j: int) -> None:
        self.positions[j].append(self._no_positions)
        self.values[j].append(self._no_values)
        self.valid[j].append(False)

    def _keep(self, index: int, set_index: int, leaves: list[Any]) -> None:
        """Reservoir sampling: every call is equally likely to be kept whole."""
        if self.reservoir <= 0:
            return
        copy = _copied(leaves)
        if len(self.kept) < self.reservoir:
            self.kept.append((index, set_index, copy))
            return
        slot = _random_below(index + 1)
        if slot < self.reservoir:
            self.kept[slot] = (index, set_index, copy)

    def save(self, path: Path) -> None:
        """Everything the parent compares, on the CPU, loadable with ``weights_only``."""
        payload = {
            "sets": _tensor(self.sets, dtype=torch.long),
            "samples": self.samples,
            "positions": [_stacked(p, torch.long, self.samples) for p in self.positions],
            "values": [_stacked(v, torch.float64, self.samples) for v in self.values],
            "valid": [_tensor(v, dtype=torch.bool) for v in self.valid],
            "problems": [[i, p] for i, p in self.problems],
            "kept": [
                [i, s, [x.cpu() if isinstance(x, torch.Tensor) else x for x in leaves]]
                for i, s, leaves in self.kept
            ],
        }
        _save(payload, path)


def _gathered(rows: list[torch.Tensor], where: torch.Tensor) -> torch.Tensor:
    """``rows[i].flatten()[where[i]]`` for every i, as float64 where ``where`` lives.

    Outputs of one device and dtype, together at most ``_STACK_BYTES``, are
    stacked and gathered in one launch each; others are gathered call by call.
    """
    first = rows[0]
    alike = all(x.device == first.device and x.dtype == first.dtype for x in rows)
    if alike and first.numel() * first.element_size() * len(rows) <= _STACK_BYTES:
        stacked = _stack(rows).reshape(len(rows), -1)
        return _gather(stacked, 1, where.to(first.device)).to(where.device, torch.float64)
    return _stack(
        [
            x.reshape(-1)[w.to(x.device)].to(where.device, torch.float64)
            for x, w in zip(rows, where, strict=True)
        ]
    )


@dataclass
class _Held:
    """A call's output leaves as a batch held them (``CheckedCalls.hold``)."""

    leaves: list[Any]


def _parts(leaf: torch.Tensor) -> torch.Tensor:
    """A leaf as the values its samples are drawn from: a complex one as its real and
    imaginary parts (both checked, as gates 2 and 3 compare them)."""
    return real_view(leaf.detach())


def _leaves(out: Any) -> list[Any]:
    """``flatten_output(out)``, without its walk for a plain tensor or a plain tuple or
    list of them (the usual output: the walk would cost more than the rest of a record)."""
    if type(out) in _PLAIN:
        return [out]
    if type(out) in (tuple, list) and all(type(x) in _PLAIN for x in out):
        return list(out)
    return flatten_output(out)


def _runs(flat: list[list[Any] | None]) -> list[tuple[int, int] | None]:
    """The batch in call order: None for a call with a problem, (start, end) for each run
    of calls without one, counted among those calls only (their rows in a leaf's draw)."""
    pieces: list[tuple[int, int] | None] = []
    start = end = 0
    for leaves in flat:
        if leaves is not None:
            end += 1
            continue
        if end > start:
            pieces.append((start, end))
        pieces.append(None)
        start = end
    if end > start:
        pieces.append((start, end))
    return pieces


def _copied(leaves: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in leaves]


def _stacked(rows: list[torch.Tensor], dtype: torch.dtype, width: int) -> torch.Tensor:
    """One device-to-host copy for all calls (thousands of small ones cost seconds).

    ``rows`` holds single calls' rows (``record``) and blocks of several calls'
    rows (``record_batch``), in call order.
    """
    if not rows:
        return torch.empty((0, width), dtype=dtype)
    blocks: list[torch.Tensor] = []
    singles: list[torch.Tensor] = []
    for row in rows:
        if row.dim() == 1:
            singles.append(row)
            continue
        if singles:
            blocks.append(_stack(singles))
            singles = []
        blocks.append(row)
    if singles:
        blocks.append(_stack(singles))
    return (torch.cat(blocks) if len(blocks) > 1 else blocks[0]).cpu()


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
