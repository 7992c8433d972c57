"""``kernelopt verify PROBLEM --candidate A.py B.py DIR/``: many candidates, one reference.

Checking a folder of candidates one ``verify`` at a time rebuilt the reference
and the zygote for each.  Here the problem is checked once, the reference is
prepared once and shared, gates 1-3 run for every candidate, and gate 4 times
the survivors one at a time (timing must own the device).  One row per
candidate; a broken candidate is a row, never the end of the batch.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gates.background_zygote import fast_launch_soon
from gates.cascade import check_candidate, time_candidate, timing_skipped, too_slow_for_cpu_timing
from gates.reference import prepare_reference
from kernelopt.contracts.verdicts import CascadeResult, GateSettings
from kernelopt.kinds.candidates import forward_candidate_file

# how many candidates' file checks (CPU children) run at once, beside the reference
_PREFLIGHTS = 2
_HEADERS = ("candidate", "verdict", "gate", "speedup", "own device s")


def _rejected(problem: Path, candidate: Path, reason: str) -> CascadeResult:
    return CascadeResult(
        problem=str(problem), candidate=str(candidate), verdicts=[], accepted=False, reason=reason
    )


def _unusable(problem: Path, candidate: Path) -> str:
    """Why a candidate file cannot be checked at all ('' when it can)."""
    from gates.sandbox import confine_preflight
    from kernelopt.errors import ProblemError
    from kernelopt.file_checks import check_candidate_file
    from kernelopt.preflight_problem import preflight

    try:
        check_candidate_file(candidate)
        preflight(problem, candidate, confine=confine_preflight)
    except ProblemError as exc:
        return f"bad candidate: {exc}"
    return ""


def verdict_word(r: CascadeResult) -> str:
    if r.could_not_run:
        return "could not run"
    if r.accepted:
        return r.category.value if r.category else "accepted (gates 1-3)"
    last = r.verdicts[-1] if r.verdicts else None
    return f"rejected ({last.status.value})" if last else "rejected"


def row(r: CascadeResult) -> tuple[str, ...]:
    speed = ""
    if r.speedup:
        speed = f"{r.speedup:.3g}x"
        if r.speedup_interval:
            speed += f" ({r.speedup_interval[0]:.3g}-{r.speedup_interval[1]:.3g})"
    gate = r.deciding_gate.value if r.deciding_gate else ("-" if r.verdicts else "input")
    return (Path(r.candidate).name, verdict_word(r), gate, speed, f"{r.gpu_seconds:.1f}")


def exit_code(results: list[CascadeResult]) -> int:
    if any(r.could_not_run for r in results):
        return 2
    return 0 if results and all(r.accepted for r in results) else 1


def _own_cost(result: CascadeResult, candidate: Path, reference_s: float) -> CascadeResult:
    """``result`` charged its own device-seconds only: the shared reference is the batch's."""
    shared = {"shared_reference_gpu_seconds": round(reference_s, 3)}
    return result.model_copy(
        update={
            "candidate": str(candidate.resolve()),
            "gpu_seconds": max(0.0, result.gpu_seconds - reference_s),
            "environment": {**result.environment, **shared},
        }
    )


def verify_batch(
    problem: Path,
    candidates: list[Path],
    settings: GateSettings,
    workdir: Path,
    on_done: Callable[[CascadeResult], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    before_gates: Callable[[], None] | None = None,
) -> tuple[list[CascadeResult], float]:
    """Gates 1-3 for every candidate on one shared reference, then gate 4 one at a time.

    A row is reported (``on_done``) as soon as its verdict is final, so the candidates
    that gates 1-3 reject land before any timing starts, and the user sees the first
    verdicts in seconds instead of after the first candidate's timing; ``on_stage`` hears
    where the batch is (the reference ready, the timing begun); ``before_gates`` runs once
    the reference is ready (a command waits there for its zygote).  Returns the
    results in the candidates' order and the shared reference's device-seconds.  Each
    result's ``gpu_seconds`` is the candidate's own: the reference is charged once, to the
    batch, not again in every row.
    """

    def stage(text: str) -> None:
        if on_stage is not None:
            on_stage(text)

    results: dict[int, CascadeResult] = {}
    to_time: list[tuple[int, CascadeResult]] = []
    started = time.monotonic()
    # each candidate's file check is a CPU child of its own: they run while the reference does
    pool = ThreadPoolExecutor(max_workers=_PREFLIGHTS)
    try:
        unusable = [pool.submit(_unusable, problem, candidate) for candidate in candidates]
        bundle = prepare_reference(problem, settings, workdir / "reference")
        stage(f"the shared reference took {time.monotonic() - started:.1f} s")
        if before_gates is not None:
            before_gates()

        def settle(i: int, result: CascadeResult) -> None:
            results[i] = result = _own_cost(result, candidates[i], bundle.gpu_seconds)
            if on_done is not None:
                on_done(result)

        for i, candidate in enumerate(candidates):
            why = unusable[i].result()
            if why:
                settle(i, _rejected(problem, candidate, why))
                continue
            forms = workdir / f"forms{i}"
            forms.mkdir(parents=True, exist_ok=True)
            checked = forward_candidate_file(candidate, forms)
            checked = check_candidate(bundle, checked, settings, workdir)
            if not (settings.run_perf and checked.accepted and not checked.could_not_run):
                settle(i, checked)
            elif slow := too_slow_for_cpu_timing(checked, settings):
                settle(i, timing_skipped(checked, slow))
            else:
                to_time.append((i, checked))
    finally:
        pool.shutdown(cancel_futures=True)
    if to_time:
        stage(f"{len(to_time)} passed gates 1-3: timing them one at a time")
    for i, checked in to_time:
        settle(i, time_candidate(checked, bundle, settings, workdir))
    return [results[i] for i in range(len(candidates))], bundle.gpu_seconds


def verify_batch_command(
    problem: Path,
    candidates: list[Path],
    json_out: bool,
    settings: GateSettings,
    problem_ready: Callable[[], int | None] = lambda: None,
) -> int:
    """Run ``verify_batch`` with a progress bar and print one row per candidate.
    ``problem_ready`` waits for the problem's own check once the zygote is starting: an
    exit code when it stopped the command (having said why), None to go on."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    err = Console(stderr=True)
    device = settings.device
    # on a GPU the gate children fork from a zygote, which loads while the reference (a
    # spawned child) is prepared
    launcher = fast_launch_soon(device) if device.startswith("cuda") else contextlib.nullcontext()
    started = time.monotonic()

    def stage(text: str) -> None:
        bar.console.print(f"[{time.monotonic() - started:.0f} s] {text}", style="dim")

    with (
        tempfile.TemporaryDirectory(prefix="kernelopt-batch-") as tmp,
        launcher as launch_ready,
    ):
        if (stop := problem_ready()) is not None:
            return stop
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task(f"verifying {len(candidates)} candidates", total=len(candidates))

            def zygote_ready() -> None:
                if launch_ready is not None:
                    stage(f"checking processes: {launch_ready().note}")

            def done(result: CascadeResult) -> None:
                bar.advance(task)
                bar.console.print(" | ".join(row(result)), highlight=False, markup=False)

            results, reference_s = verify_batch(
                problem, candidates, settings, Path(tmp), done, stage, zygote_ready
            )
    if json_out:
        print(json.dumps([json.loads(r.model_dump_json()) for r in results], indent=2))
        return exit_code(results)
    table = Table()
    for header in _HEADERS:
        table.add_column(header, overflow="fold", no_wrap=header in ("speedup", "own device s"))
    for result in results:
        table.add_row(*row(result))
    console = Console()
    console.print(table)
    total = reference_s + sum(r.gpu_seconds for r in results)
    console.print(
        f"{len(results)} candidates, {total:.1f} device-seconds "
        f"(the shared reference {reference_s:.1f} of them, once)",
        highlight=False,
    )
    for result in results:
        if not result.accepted and result.reason:
            console.print(f"{Path(result.candidate).name}: {result.reason}"[:300], markup=False)
    return exit_code(results)
