"""Large problems on the CPU: say how long the check takes, shrink the batch when it must.

A problem sized for an H200 can take minutes per call on a 2-core CPU, and a
CPU verify makes about ``3.5 n + 3`` reference-speed calls for ``n`` input sets
(the reference, its determinism probes and float64 run, the candidate's dry
run and calls).  Before the first real call, one call on a single row of the
batch gives an upper bound per row; when the whole check would exceed the
budget (``GateSettings.cpu_budget_s``), every input set is cut to a batch that
fits, like ``derived_holdout`` cuts it, and the verdict says so.  A model that
takes no other batch is checked at full size, and the estimate is announced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gates.job_progress import mark
from gates.protocol import InputSet, ReferenceJob
from kernelopt.durations import human_duration


def calls_per_check(sets: int) -> float:
    """Reference-speed calls of a CPU check with ``sets`` input sets (identity candidate)."""
    return 3.5 * sets + 3


def batch_size(values: list[Any]) -> int | None:
    first = next((v for v in values if isinstance(v, torch.Tensor) and v.dim() >= 1), None)
    return int(first.shape[0]) if first is not None else None


def cut(values: list[Any], batch: int, rows: int) -> list[Any]:
    """Every tensor whose leading dimension is ``batch`` keeps its first ``rows`` rows."""
    return [
        v[:rows].clone()
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch
        else v
        for v in values
    ]


class CpuBudget:
    """Decides once, on the first input set, whether every set is cut to a smaller batch."""

    def __init__(self, job: ReferenceJob, problem: Any) -> None:
        self.budget = job.cpu_budget_s
        # a candidate's check: the seed sets and one draw of the rest; held-out shapes on top
        self.sets = len([s for s in job.input_sets if s.group <= 0]) + 2
        self.full: int | None = None
        self.rows: int | None = None  # the batch every set is cut to; None: full size
        self.decided = False
        self.note = ""
        self.estimate = ""
        if job.draw_only is not None:  # a kept bundle's new draw: cut as its other sets were
            self.decided = True
            self.rows = job.draw_only.cpu_rows or None
            self.note = job.draw_only.inputs_note

    def fit(
        self, values: list[Any], s: InputSet, time_call: Callable[[list[Any]], float]
    ) -> list[Any]:
        if not self.decided:
            self.decided = True
            self._decide(values, time_call)
        batch = batch_size(values)
        if self.rows is not None and self.full is None:
            self.full = batch  # decided beforehand: the first set has the main batch
        if self.rows is None or self.full is None or batch is None:
            return values
        if s.kind == "derived":  # another batch than the checked one, as derived_holdout makes
            fewer = s.holdout_index == 0 and self.rows >= 2
            rows = self.rows - 1 if fewer else min(self.rows + 1, batch)
        elif batch == self.full:
            rows = self.rows
        else:  # a held-out shape: scaled like the main batch
            rows = max(1, batch * self.rows // self.full)
        return cut(values, batch, min(rows, batch))

    def _decide(self, values: list[Any], time_call: Callable[[list[Any]], float]) -> None:
        batch = batch_size(values)
        if batch is None or batch < 2:
            return
        one = cut(values, batch, 1)
        try:
            time_call(one)  # lazy initialisation is not a row's cost
            per_row = time_call(one)
        except Exception:  # the model takes no other batch size: full size, estimate later
            return
        calls = calls_per_check(self.sets)
        full_s = per_row * batch * calls
        if full_s <= self.budget:
            return
        rows = max(1, int(self.budget / (per_row * calls)))
        if rows >= batch:
            return
        self.full, self.rows = batch, rows
        self.note = (
            f"inputs cut from batch {batch} to {rows} to fit the CPU budget of "
            f"{human_duration(self.budget)} (one row took {per_row:.2g} s: full size would take "
            f"about {human_duration(full_s)}); the GPU checks full size"
        )
        mark("estimate", set=self.note)

    def announce(self, first_seconds: float, sets: int) -> None:
        """The whole check's duration from the first full reference call, said when long."""
        total = first_seconds * calls_per_check(sets)
        self.estimate = (
            f"about {human_duration(total)} for the whole check at reference speed "
            f"(one reference call took {first_seconds:.2g} s; a Triton-interpreted candidate "
            "takes longer)"
        )
        if total > 60:
            mark("estimate", set=self.estimate)
