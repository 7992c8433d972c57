"""Screen child: a round's candidates, untrusted, in one process (the search's first tier).

It builds the baseline once, runs it on one input, then for each candidate in
turn imports and builds it, compares its output with the baseline's (a smoke
check, not gate 2) and times both sides a few times.  That is what makes
screening sub-second per candidate: the process, torch and the baseline are paid
once per round, not once per candidate.  It runs like every gate job (the
runner's sandbox, limits and zygote); its job's files are read-only, only its
workdir is writable.

Every candidate's line goes to ``results.jsonl`` in the workdir as soon as it is
known, and a progress mark precedes each candidate, so when one kills or hangs
the process the parent knows which one did it (``run_job``'s ``stall_s`` ends a
child that stops marking) and starts a child for the rest.  Candidates share this
process, so one could slow another's timings down: the estimates are untrusted
by construction and only rank; the four-gate cascade decides.  After each
candidate the child looks for what it left behind (Python threads still running,
a baseline that no longer gives its outputs) and names it on the candidate's
line (``suspect``), so the parent can screen the ones after it again in a fresh
child.  A candidate that hides its traces from these checks is not caught here:
see gates/README.md's anti-gaming table.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any, TextIO

import torch

from gates.call_policy import seed_everything
from gates.job_progress import job_file, mark
from gates.jobs.build import build_callable
from gates.problem_io import ProblemFile, flatten_output, to_device
from gates.protocol import SCREEN_RESULTS, ModelSource, ScreenJob, ScreenJobResult, ScreenLine
from kernelopt.contracts.screening import ScreenParams
from kernelopt.kinds.validate import LeafMismatch, tensor_pairs
from kernelopt.measure import Stopwatch, elapsed, median_ms

JOB_TYPE = ScreenJob
SMOKE_TOL = 1e-2  # looser than gate 2: screening only keeps obvious failures out


def context_lost(exc: BaseException) -> bool:
    """A CUDA error is sticky: every later call in this process would fail with it too."""
    text = f"{type(exc).__name__}: {exc}"
    return "AcceleratorError" in text or "CUDA error" in text


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], Any], device: str, params: ScreenParams) -> float:
    """Median ms of one call (``kernelopt.measure``): small do_bench budgets on CUDA, a
    fixed number of calls on the CPU, where the Triton interpreter is slow."""
    if device.startswith("cuda"):
        return median_ms(fn, cuda=True, warmup_ms=params.warmup_ms, rep_ms=params.rep_ms)
    watches = [Stopwatch(cuda=False) for _ in range(params.cpu_calls)]
    for watch in watches:
        watch.start()
        fn()
        watch.stop()
    return median(elapsed(watches))


def smoke_note(got: Any, want: list[Any]) -> str:
    """ "" when ``got`` matches the baseline's flattened outputs, else what differs."""
    for pair in tensor_pairs(flatten_output(got), want):
        if isinstance(pair, LeafMismatch):
            return _mismatch_note(pair)
        i, a, b = pair
        a, b = a.detach().float().cpu(), b.detach().float().cpu()
        if not torch.allclose(a, b, rtol=SMOKE_TOL, atol=SMOKE_TOL, equal_nan=False):
            err = (a - b).abs().nan_to_num(float("inf")).max().item()
            return f"output {i}: max abs error {err:.3g} > {SMOKE_TOL}"
    return ""


def _mismatch_note(m: LeafMismatch) -> str:
    i, a, b = m.index, m.got, m.want
    if m.what == "count":
        return f"{a} outputs, the baseline has {b}"
    if m.what == "value":
        return f"output {i} differs"
    return f"output {i}: {a.dtype}{list(a.shape)}, the baseline's {b.dtype}{list(b.shape)}"


class _Side:
    """One callable on fresh copies of the round's input."""

    def __init__(self, fn: Callable[..., Any], inputs: list[Any]) -> None:
        self.fn = fn
        self.inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    def __call__(self) -> Any:
        return self.fn(*self.inputs)


def _screen_one(src: ModelSource, job: ScreenJob, inputs: list[Any], want: list[Any]) -> ScreenLine:
    fn, _ = build_callable(src, job.device, job.model_seed, job.inputs_dir)
    side = _Side(fn, inputs)
    seed_everything(job.seed)
    with torch.no_grad():
        got = side()
        _sync(job.device)
        note = smoke_note(got, want)
        if note:
            return ScreenLine(note=note)
        return ScreenLine(ok=True, ms=time_ms(side, job.device, job.params))


def left_behind(base: _Side, want: list[Any], threads: int, job: ScreenJob) -> str:
    """What the last candidate left that could disturb the next ones ("" when nothing seen).

    Cheap on purpose (one baseline call): a Python thread still running (a GPU
    hog, a timer), or a baseline whose output changed (a patched torch op).
    """
    extra = threading.active_count() - threads
    if extra > 0:
        return f"left {extra} thread(s) running"
    try:
        seed_everything(job.seed)
        with torch.no_grad():
            got = base()
            _sync(job.device)
    except Exception as exc:
        return f"the baseline raised after it: {type(exc).__name__}"[:200]
    note = smoke_note(got, want)
    return f"the baseline's output changed after it: {note}"[:200] if note else ""


def _write(out: TextIO, line: ScreenLine) -> None:
    out.write(line.model_dump_json() + "\n")
    out.flush()
    os.fsync(out.fileno())


def _done(path: Path) -> set[str]:
    """Ids with a line already (an earlier child of this pass wrote them)."""
    if not path.is_file():
        return set()
    done = set()
    for raw in path.read_text(errors="replace").splitlines():
        try:
            done.add(ScreenLine.model_validate_json(raw).candidate_id)
        except ValueError:
            break  # a line cut short by a kill
    return done


def run(job: ScreenJob) -> ScreenJobResult:
    """The baseline's line (unless an earlier child wrote it), then one per candidate."""
    path = job_file(SCREEN_RESULTS)
    done = _done(path)
    written = 0
    mark("screen_baseline")
    problem = ProblemFile(job.baseline.problem_path)
    inputs = to_device(problem.inputs(job.seed), job.device)
    with open(path, "a") as out:
        started = time.perf_counter()
        # a restart builds the baseline again: its outputs are the smoke check's reference
        fn, _ = build_callable(job.baseline, job.device, job.model_seed, job.inputs_dir)
        base = _Side(fn, inputs)
        seed_everything(job.seed)
        with torch.no_grad():
            want = [x.detach().clone() for x in flatten_output(base())]
            _sync(job.device)
            base_ms = time_ms(base, job.device, job.params)
        if "" not in done:
            _write(out, ScreenLine(ok=True, ms=base_ms, seconds=time.perf_counter() - started))
            written += 1
        threads = threading.active_count()
        for entry in job.candidates:
            cid = entry.candidate_id
            if cid in done:
                continue
            mark("screen", candidate=cid)
            started = time.perf_counter()
            try:
                line = _screen_one(entry.model, job, inputs, want)
            except Exception as exc:  # a broken candidate is an estimate, not our failure
                tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
                line = ScreenLine(note=f"raised {tail}"[:400], restart=context_lost(exc))
            line = line.model_copy(
                update={"candidate_id": cid, "seconds": time.perf_counter() - started}
            )
            if not line.restart:  # a lost context ends this process: nothing to disturb
                line = line.model_copy(update={"suspect": left_behind(base, want, threads, job)})
                threads = threading.active_count()
            _write(out, line)
            written += 1
            if line.restart:  # the parent starts a fresh child for the candidates after it
                return ScreenJobResult(lines=written, restart=True)
    mark("done")
    return ScreenJobResult(lines=written)
