"""The screening child: ``python -m activities.screen_child JOBDIR OUTDIR``, in the gates' sandbox.

One process screens a whole round: it builds the baseline once, runs it on one
input, then for each candidate in turn imports and builds it, compares its
output with the baseline's (a smoke check, not gate 2) and times both sides a
few times.  That is what makes screening sub-second per candidate: the process,
torch and the baseline are paid once per round, not once per candidate.

The job, the problem and every candidate's file are read-only in the sandbox
(one candidate cannot rewrite another's source); only ``OUTDIR`` is writable.
Every candidate's line goes to ``results.jsonl`` as soon as it is known, so when
a candidate kills the process (a segfault, a hang the parent ends) the parent
knows which one did it and starts a child for the rest.  Candidates share this
process, so one could slow another's timings down: the estimates are untrusted
by construction and only rank; the four-gate cascade decides.  After each
candidate the child looks for what it left behind (Python threads still
running, a baseline that no longer gives its outputs) and names it on the
candidate's line (``suspect``), so the parent can screen the ones after it
again in a fresh child.  A candidate that hides its traces from these checks
is not caught here: see gates/README.md's anti-gaming table.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

from pydantic import BaseModel

from gates.protocol import ModelSource
from kernelopt.contracts.base import Frozen
from kernelopt.contracts.screening import ScreenParams
from kernelopt.measure import Stopwatch, elapsed, median_ms
from kernelopt.pidfile import die_with_parent

RESULTS = "results.jsonl"
JOB = "job.json"
SMOKE_TOL = 1e-2  # looser than gate 2: screening only keeps obvious failures out


class ScreenChildJob(Frozen):
    device: str
    seed: int
    model_seed: int
    inputs_dir: str  # the call policy and weights a gate reference would leave (here: none)
    baseline: ModelSource
    candidates: list[tuple[str, ModelSource]]
    params: ScreenParams


class ChildLine(BaseModel):
    """One line of ``results.jsonl``: the baseline's (``candidate_id`` "") or a candidate's."""

    candidate_id: str = ""
    ok: bool = False
    note: str = ""
    ms: float | None = None
    seconds: float = 0.0
    restart: bool = False  # it left the CUDA context unusable: the rest need a fresh child
    suspect: str = ""  # what it left behind that could disturb the candidates after it


def context_lost(exc: BaseException) -> bool:
    """A CUDA error is sticky: every later call in this process would fail with it too."""
    text = f"{type(exc).__name__}: {exc}"
    return "AcceleratorError" in text or "CUDA error" in text


def _sync(device: str) -> None:
    import torch

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
    import torch

    from gates.problem_io import flatten_output

    leaves = flatten_output(got)
    if len(leaves) != len(want):
        return f"{len(leaves)} outputs, the baseline has {len(want)}"
    for i, (a, b) in enumerate(zip(leaves, want, strict=True)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                return f"output {i} differs"
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)}, the baseline's {b.dtype}{list(b.shape)}"
        a, b = a.detach().float().cpu(), b.detach().float().cpu()
        if not torch.allclose(a, b, rtol=SMOKE_TOL, atol=SMOKE_TOL, equal_nan=False):
            err = (a - b).abs().nan_to_num(float("inf")).max().item()
            return f"output {i}: max abs error {err:.3g} > {SMOKE_TOL}"
    return ""


class _Side:
    """One callable on fresh copies of the round's input."""

    def __init__(self, fn: Callable[..., Any], inputs: list[Any]) -> None:
        import torch

        self.fn = fn
        self.inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    def __call__(self) -> Any:
        return self.fn(*self.inputs)


def _screen_one(
    src: ModelSource, job: ScreenChildJob, inputs: list[Any], want: list[Any]
) -> ChildLine:
    import torch

    from gates.call_policy import seed_everything
    from gates.jobs.build import build_callable

    fn, _ = build_callable(src, job.device, job.model_seed, job.inputs_dir)
    side = _Side(fn, inputs)
    seed_everything(job.seed)
    with torch.no_grad():
        got = side()
        _sync(job.device)
        note = smoke_note(got, want)
        if note:
            return ChildLine(note=note)
        return ChildLine(ok=True, ms=time_ms(side, job.device, job.params))


def left_behind(base: _Side, want: list[Any], threads: int, job: ScreenChildJob) -> str:
    """What the last candidate left that could disturb the next ones ("" when nothing seen).

    Cheap on purpose (one baseline call): a Python thread still running (a GPU
    hog, a timer), or a baseline whose output changed (a patched torch op).
    """
    import torch

    from gates.call_policy import seed_everything

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


def _write(out: Any, line: ChildLine) -> None:
    out.write(line.model_dump_json() + "\n")
    out.flush()
    os.fsync(out.fileno())


def run(jobdir: Path, outdir: Path) -> None:
    import torch

    from gates.call_policy import seed_everything
    from gates.jobs.build import build_callable
    from gates.problem_io import ProblemFile, flatten_output, to_device

    job = ScreenChildJob.model_validate_json((jobdir / JOB).read_text())
    problem = ProblemFile(job.baseline.problem_path)
    inputs = to_device(problem.inputs(job.seed), job.device)
    with (outdir / RESULTS).open("a") as out:
        done = {
            ChildLine.model_validate_json(line).candidate_id
            for line in (outdir / RESULTS).read_text().splitlines()
        }
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
            _write(out, ChildLine(ok=True, ms=base_ms, seconds=time.perf_counter() - started))
        threads = threading.active_count()
        for cid, src in job.candidates:
            if cid in done:
                continue
            started = time.perf_counter()
            try:
                line = _screen_one(src, job, inputs, want)
            except Exception as exc:  # a broken candidate is an estimate, not our failure
                tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
                line = ChildLine(note=f"raised {tail}"[:400], restart=context_lost(exc))
            line = line.model_copy(
                update={"candidate_id": cid, "seconds": time.perf_counter() - started}
            )
            if not line.restart:  # a lost context ends this process: nothing to disturb
                line = line.model_copy(update={"suspect": left_behind(base, want, threads, job)})
                threads = threading.active_count()
            _write(out, line)
            if line.restart:
                os._exit(3)  # the parent starts a fresh child for the candidates after it


def main(argv: list[str]) -> int:
    die_with_parent()
    run(Path(argv[0]), Path(argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a candidate's atexit hooks or a wedged context must not hang the exit


if __name__ == "__main__":
    main(sys.argv[1:])
