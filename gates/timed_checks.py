"""The parent's side of checked timing: every call a timing child made, compared.

The timing child (``gates.checked_calls``) records, for every call, which
input set it ran on, sampled output elements at positions drawn after the
call, problems with the output object itself, and a few whole outputs chosen
at random.  Here they are compared with the reference outputs, which only this
process holds, by gate 2's rules: ``|out - ref| <= atol + rtol * |ref|``
elementwise (exact for integers, NaN and inf reproduced), and the error
relative to the output's magnitude.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gates.index_ties import matches_alternate
from gates.numerics import compare_outputs, float64_excused, real_view
from gates.reference_facts import ReferenceFacts
from gates.sampled_float64 import SampledErrors, SampledRule
from kernelopt.float_units import coarse_dtype, ulps


@dataclass(frozen=True)
class TimedCheck:
    """The outcome of checking one timing child's calls."""

    ok: bool
    calls: int
    reason: str = ""
    call_index: int | None = None
    set_name: str = ""
    samples: int = 0  # sampled elements compared
    whole_outputs: int = 0  # calls compared in full

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "calls": self.calls,
            "reason": self.reason,
            "call_index": self.call_index,
            "set": self.set_name,
            "samples": self.samples,
            "whole_outputs": self.whole_outputs,
        }


def check_timed_calls(
    path: Path,
    set_names: list[str],
    refs: dict[str, list[Any]],
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
    facts: ReferenceFacts | None = None,
    reveals: Callable[[str], bool] = lambda name: True,
    in_full: Callable[[str, list[Any]], str] | None = None,
    sampled: Callable[[str], SampledRule | None] = lambda name: None,
    refs64: dict[str, list[Any]] | None = None,
    ties64: dict[str, list[Any]] | None = None,
    leaf_names: list[str] | None = None,
) -> TimedCheck:
    """Compare every recorded call with the reference of the set it ran on (``facts``: the bundle's).

    ``leaf_names``: what each recorded leaf is, for the reasons (default "output j"; a
    side effect's value follows the outputs).

    ``reveals(set)``: whether the reason may quote the expected value of a wrong
    element of that set (not while later candidates are judged on the same set).
    ``in_full(set, leaves)``: a further rule for the calls kept whole (the problem, or
    ""), the float64 one of gate 3: a kernel that can tell timing from checking may be
    within gate 2's tolerance there and still not the function gate 3 accepted.
    ``sampled(set)``: gate 3's rule for every call's samples on that set, where it has
    a float64 reference (``gates.sampled_float64``).  Where a set has one (``refs64``, and
    ``sampled``'s flat copies), an element the float64 reference excuses is not wrong
    (``gates.numerics.float64_excused``), as in gate 2, and so is an index equal to one of
    its near-tied alternates (``ties64``, ``gates.index_ties``).
    """
    if not path.is_file():
        return TimedCheck(False, 0, "the timing child recorded no checks (its file is missing)")
    try:
        data = torch.load(path, weights_only=True)
    except (EOFError, OSError, RuntimeError, pickle.UnpicklingError) as exc:
        return TimedCheck(False, 0, f"the timing child's checks are unreadable: {exc}"[:300])
    sets: torch.Tensor = data["sets"]
    calls = int(sets.numel())
    for index, problem in data["problems"]:
        name = set_names[int(sets[index])] if index < calls else ""
        return TimedCheck(False, calls, f"timed call #{index}: {problem}", int(index), name)
    compared = 0

    def what(j: int) -> str:
        return leaf_names[j] if leaf_names and j < len(leaf_names) else f"output {j}"

    first: tuple[int, str] | None = None  # (call index, reason) of the earliest wrong call
    errors = SampledErrors.empty(calls)
    rules = {k: sampled(name) for k, name in enumerate(set_names)}
    for j, (positions, values, valid) in enumerate(
        zip(data["positions"], data["values"], data["valid"], strict=True)
    ):
        for k, name in enumerate(set_names):
            ref = refs[name][j]
            if not isinstance(ref, torch.Tensor):
                continue
            rows = ((sets == k) & valid).nonzero().flatten()
            if rows.numel() == 0:
                continue
            flat = real_view(ref).reshape(-1).double()  # complex: both parts, as sampled
            got = values[rows]
            beyond = positions[rows] >= flat.numel()  # an output larger than the set's answer
            if bool(beyond.any()):
                index = int(rows[int(beyond.any(dim=1).nonzero()[0, 0])])
                if first is None or index < first[0]:
                    first = (
                        index,
                        f"timed call #{index} (input set {name}) returned a wrong {what(j)}: "
                        f"more elements than the reference's {flat.numel()}",
                    )
                continue
            want = flat[positions[rows]]
            rule = rules[k]
            bad = ~_close(got, want, ref, rtol=rtol, atol=atol, scale_tol=scale_tol, flat=flat)
            leaf64 = _leaf64(refs64, name, j, ref) if bool(bad.any()) else None
            if leaf64 is not None:
                want64 = leaf64[positions[rows]].double()
                bad &= ~_excused(got, want, want64, ref.dtype, rtol=rtol, atol=atol)
                ties = _ties(ties64, name, j)
                if ties is not None:
                    bad &= ~matches_alternate(got, positions[rows], ties)
            compared += int(got.numel())
            if rule and j in rule.refs64:
                errors.add(rows, got, want, rule.refs64[j][positions[rows]], rule.tolerance)
            if not bool(bad.any()):
                continue
            row, col = (int(v) for v in bad.nonzero()[0])  # row-major: the earliest call
            index = int(rows[row])
            if first is None or index < first[0]:
                pos = int(positions[index, col])
                expected = f", expected {float(want[row, col]):.6g}" if reveals(name) else ""
                first = (
                    index,
                    f"timed call #{index} (input set {name}) returned a wrong {what(j)}: "
                    f"element {pos} is {float(got[row, col]):.6g}{expected} "
                    f"({int(bad[row].sum())} of {bad.shape[1]} sampled elements differ)",
                )
    if first is None:
        first = _earliest_float64_failure(errors, sets, rules, set_names)
    if first is not None:
        index = first[0]
        return TimedCheck(False, calls, first[1], index, set_names[int(sets[index])], compared)
    for index, k, leaves in data["kept"]:
        name = set_names[int(k)]
        cmp = compare_outputs(
            leaves,
            refs[name],
            rtol=rtol,
            atol=atol,
            scale_tol=scale_tol,
            facts=facts,
            refs64=(refs64 or {}).get(name),
            ties64=(ties64 or {}).get(name),
        )
        problem = cmp.problem if not cmp.ok else (in_full(name, leaves) if in_full else "")
        if problem:
            return TimedCheck(
                False,
                calls,
                f"timed call #{index} (input set {name}), compared in full: {problem}",
                int(index),
                name,
                compared,
                len(data["kept"]),
            )
    return TimedCheck(True, calls, "", None, "", compared, len(data["kept"]))


def _earliest_float64_failure(
    errors: SampledErrors,
    sets: torch.Tensor,
    rules: dict[int, SampledRule | None],
    set_names: list[str],
) -> tuple[int, str] | None:
    """(call index, reason) of the earliest call whose samples fail gate 3's rule."""
    first: tuple[int, str] | None = None
    for k, rule in rules.items():
        if rule is None:
            continue
        rows = (sets == k).nonzero().flatten()
        failing = rows[errors.failing(rows, rule)]
        if failing.numel() and (first is None or int(failing[0]) < first[0]):
            index = int(failing[0])
            first = (
                index,
                f"timed call #{index} (input set {set_names[k]}) is less exact than gate 3 "
                f"allows: {rule.describe(float(errors.d_opt[index]))}",
            )
    return first


def _close(
    got: torch.Tensor,
    want: torch.Tensor,
    ref: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    scale_tol: float,
    flat: torch.Tensor,
) -> torch.Tensor:
    """Elementwise gate-2 rule on samples (integers and booleans exactly)."""
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    if not (ref.is_floating_point() or ref.is_complex()):
        return same
    coarse = coarse_dtype(ref.dtype, rtol)
    finite = torch.isfinite(want) & torch.isfinite(got)
    err = torch.where(finite, (got - want).abs(), torch.zeros_like(want))
    bound = atol + rtol * want.abs()
    if coarse is not None:  # one unit in the last place of a coarse dtype (gate 2's rule)
        bound = torch.maximum(bound, ulps(torch.where(finite, want, 0.0), coarse))
        scale_tol = max(scale_tol, torch.finfo(coarse).eps)
    within = finite & (err <= bound)
    finite_ref = flat[torch.isfinite(flat)]
    scale = float(finite_ref.abs().max()) if finite_ref.numel() else 0.0
    if scale > 0:
        within &= err <= scale_tol * scale + 1e-30
    return same | within


def _excused(
    got: torch.Tensor,
    want: torch.Tensor,
    want64: torch.Tensor,
    dtype: torch.dtype,
    *,
    rtol: float,
    atol: float,
) -> torch.Tensor:
    """``float64_excused`` over sampled elements (calls by samples, float64 each) that gate
    2's rule refused, elementwise or by the scale; integers and booleans where they equal
    the float64 run's value."""
    if not dtype.is_floating_point:
        return got == want64
    flat = float64_excused(
        got.reshape(-1),
        want.reshape(-1),
        want64.reshape(-1),
        rtol=rtol,
        atol=atol,
        dtype=dtype,
        only_apart=False,
    )
    return flat.view(got.shape)


def _ties(ties64: dict[str, list[Any]] | None, name: str, j: int) -> torch.Tensor | None:
    """Output ``j``'s near-tied alternates on set ``name`` (None: not an index op's result
    with near-ties)."""
    leaf = (ties64 or {}).get(name, [])
    ties = leaf[j] if j < len(leaf) else None
    return ties if isinstance(ties, torch.Tensor) and ties.dim() == 2 else None


def _leaf64(
    refs64: dict[str, list[Any]] | None, name: str, j: int, ref: torch.Tensor
) -> torch.Tensor | None:
    """Output ``j``'s float64-run values on set ``name``, flat, where they pair
    with the reference's element by element (None: no float64 run, or a complex leaf)."""
    leaf = (refs64 or {}).get(name, [])
    r64 = leaf[j] if j < len(leaf) else None
    if not isinstance(r64, torch.Tensor) or ref.is_complex() or r64.numel() != ref.numel():
        return None
    if ref.is_floating_point() != r64.is_floating_point():
        return None
    if not ref.is_floating_point() and r64.dtype != ref.dtype:  # as gate 2 pairs them
        return None
    return r64.reshape(-1)
