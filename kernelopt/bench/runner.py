"""Run one campaign per suite problem, resumably, with a progress display.

``start_campaign(path, level)`` is injected: the CLI wires it to the real
Temporal client (start the campaign workflow, await its ``Outcome``); tests
pass a double.  The runner only owns the bench bookkeeping:

* a problem whose Outcome JSON already exists in ``results_dir`` is finished
  and skipped, so re-running the same command after a crash or preemption
  continues where it stopped;
* each Outcome is written (atomically) the moment its campaign ends, not at the
  end of the suite;
* a campaign that raises is recorded as an error of this run and NOT written
  as an outcome -- inventing a "fallback" for an infrastructure failure would
  put a fake 1.0x into the geomean -- so the next run retries it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from kernelopt.contracts import Outcome
from kernelopt.log import get_logger

from .results import (
    ProblemResult,
    clear_error,
    read_outcome,
    record_error,
    result_path,
    save_outcome,
)
from .suite import SuiteEntry, discover_suite

log = get_logger(__name__)

StartCampaign = Callable[[Path, int | None], Awaitable[Outcome]]


@dataclass
class SuiteRun:
    """What one ``run_suite`` call did; ``results`` holds every finished problem."""

    results: list[ProblemResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # finished in an earlier run
    ran: list[str] = field(default_factory=list)  # finished in this run
    errors: dict[str, str] = field(default_factory=dict)  # key -> error, retried next run
    deferred: list[str] = field(default_factory=list)  # not started: past ``start_within``

    @property
    def complete(self) -> bool:
        return not self.errors


def _make_progress(console: Console | None) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=console or Console(stderr=True),
        transient=False,
    )


async def run_suite(
    suite_dir: str | Path,
    results_dir: str | Path,
    start_campaign: StartCampaign,
    progress: bool | Progress = True,
    *,
    concurrency: int = 1,
    levels: set[int] | None = None,
    console: Console | None = None,
    start_within: float | None = None,
) -> SuiteRun:
    """Run every unfinished problem of ``suite_dir``; write outcomes under ``results_dir``.

    ``progress``: True draws a rich progress bar (on stderr), False none, or
    pass a live ``Progress`` to add the bench task to it.  ``concurrency``
    campaigns are in flight at once (GPU work is serialised by the worker's
    task queue anyway; more in flight overlaps the CPU/LLM parts).
    ``start_within``: seconds after which no new campaign starts -- the ones
    running finish, the rest wait for the next run -- so a GPU lease that ends
    at a known time is not spent on campaigns it cannot finish.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if start_within is not None and start_within < 0:
        raise ValueError(f"start_within must be >= 0 seconds, got {start_within}")
    deadline = None if start_within is None else time.monotonic() + start_within
    entries = discover_suite(suite_dir, levels=levels)
    results_root = Path(results_dir)
    results_root.mkdir(parents=True, exist_ok=True)
    run = SuiteRun()
    done: dict[str, ProblemResult] = {}
    pending: list[SuiteEntry] = []
    for entry in entries:
        outcome = read_outcome(result_path(results_root, entry))
        if outcome is None:
            pending.append(entry)
        else:
            done[entry.key] = ProblemResult(level=entry.level, name=entry.name, outcome=outcome)
            run.skipped.append(entry.key)
    log.info(
        "bench.start",
        suite=str(suite_dir),
        problems=len(entries),
        finished=len(run.skipped),
        pending=len(pending),
    )

    own_progress = progress is True
    bar: Progress | None = _make_progress(console) if own_progress else (progress or None)
    task = None
    if bar is not None:
        task = bar.add_task("bench", total=len(entries), completed=len(run.skipped), status="")
    semaphore = asyncio.Semaphore(concurrency)

    async def one(entry: SuiteEntry) -> None:
        async with semaphore:
            if deadline is not None and time.monotonic() > deadline:
                run.deferred.append(entry.key)
                return
            if bar is not None and task is not None:
                bar.update(task, status=f"running {entry.key}")
            log.info("bench.problem_start", problem=entry.key)
            try:
                outcome = await start_campaign(entry.path, entry.level)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one failed campaign must not end a 250-problem run
                run.errors[entry.key] = f"{type(exc).__name__}: {exc}"
                record_error(results_root, entry.key, run.errors[entry.key])
                log.error("bench.problem_error", problem=entry.key, error=run.errors[entry.key])
            else:
                save_outcome(results_root, entry, outcome)
                clear_error(results_root, entry.key)
                done[entry.key] = ProblemResult(level=entry.level, name=entry.name, outcome=outcome)
                run.ran.append(entry.key)
                log.info(
                    "bench.problem_done",
                    problem=entry.key,
                    category=outcome.category.value,
                    speedup=outcome.speedup,
                )
            if bar is not None and task is not None:
                bar.update(task, advance=1, status=f"{entry.key} done")

    try:
        if own_progress and bar is not None:
            bar.start()
        await asyncio.gather(*(one(e) for e in pending))
    finally:
        if own_progress and bar is not None:
            bar.stop()
    run.results = [done[e.key] for e in entries if e.key in done]
    log.info(
        "bench.finished",
        ran=len(run.ran),
        skipped=len(run.skipped),
        errors=len(run.errors),
        deferred=len(run.deferred),
    )
    return run
