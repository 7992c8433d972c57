"""`kernelopt bench SUITE_DIR`: one campaign per problem through the normal workflows.

Campaign ids are derived from the suite path and the problem, so re-running
after a crash re-attaches to a campaign still in flight (or already finished)
instead of starting a duplicate; finished outcomes on disk are skipped by the
runner.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from kernelopt.bench.aggregate import summarize
from kernelopt.bench.gpu_cost import collect_notes, gpu_cost
from kernelopt.bench.report import ReportFiles, write_report
from kernelopt.bench.results import BenchRun, load_errors, load_results, load_runs, record_run
from kernelopt.bench.runner import run_suite
from kernelopt.bench.suite import discover_suite
from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.config import Settings
from kernelopt.contracts import CampaignOptions, Outcome
from kernelopt.contracts.search import ProposerKind
from kernelopt.log import get_logger
from kernelopt.preflight_problem import preflight

log = get_logger(__name__)


def bench_campaign_id(suite_dir: Path, path: Path, level: int | None) -> str:
    digest = hashlib.sha256(str(Path(suite_dir).resolve()).encode()).hexdigest()[:8]
    return f"bench-{digest}-l{level if level is not None else 0}-{path.stem}"[:120]


def search_settings(options: CampaignOptions) -> str:
    """The settings a reader needs to compare suite numbers, in one line."""
    p, s = options.proposer, options.search
    llm = p.kind == ProposerKind.LLM or (p.kind == ProposerKind.AUTO and bool(p.base_url))
    proposer = f"LLM {p.model} @ {p.base_url or 'default endpoint'}" if llm else "builtin (no LLM)"
    targets = options.max_targets if options.max_targets is not None else "all"
    return (
        f"proposer {proposer}; {s.iterations} iteration(s), {s.plans} plan(s), beam {s.beam}, "
        f"{s.retries} retries; max targets {targets}; library-dominated searched: "
        f"{'yes' if options.search_library_dominated else 'no'}; gamma {options.gamma:g}; "
        f"compile mode {options.compile_mode}"
    )


def results_dir_for(suite_dir: Path, results_dir: Path | None) -> Path:
    """Where a suite's outcomes live: ``--results``, else ``SUITE/results``."""
    return Path(results_dir or Path(suite_dir) / "results")


def write_bench_report(
    results: Path, suite_problems: int, gamma: float, home: Path | None = None
) -> ReportFiles:
    """The report of whatever has finished, stating how much of the suite that is.

    The GPU workers' notes of each campaign (under ``home``) are copied beside the
    outcomes first, so the GPU-cost section travels with the results.
    """
    collect_notes(results, home or Settings.from_env().home)
    summary = summarize(
        load_results(results),
        gamma=gamma,
        suite_problems=suite_problems,
        search_settings=[r.search for r in load_runs(results)],
        failed=load_errors(results),
        gpu_cost=gpu_cost(results),
    )
    return write_report(summary, results)


async def bench_command(
    client: Client,
    settings: Settings,
    suite_dir: Path,
    results_dir: Path | None,
    options: CampaignOptions,
    console: Console | None = None,
    concurrency: int | None = None,
    start_within: float | None = None,
) -> int:
    """Run the suite; ``concurrency`` campaigns at a time (None: one per local GPU worker).

    Every GPU worker runs one activity at a time, so more campaigns in flight than
    GPU workers only queue; fewer leave GPUs idle.  ``start_within``: see ``run_suite``.
    """
    from kernelopt.store import open_store

    console = console or Console(stderr=True)
    suite_dir = Path(suite_dir)
    results = results_dir_for(suite_dir, results_dir)
    store = open_store(settings.artifacts_dir)
    gpu_workers = 1
    if settings.embedded:
        from kernelopt.local_workers import ensure_local_workers

        gpu_workers = max(1, sum(1 for name in ensure_local_workers(settings) if name != "cpu"))
    concurrency = concurrency or gpu_workers

    async def one(path: Path, level: int | None) -> Outcome:
        # as `optimize` does: a file no campaign can run (say, shapes that follow the seed)
        # fails here with its reason, and no GPU worker compiles it
        unchecked = await asyncio.to_thread(preflight, path, one_shape=True)
        if unchecked:
            log.info("bench.preflight_left_to_gpu", problem=str(path), note=unchecked)
        problem = prepare_problem(path, store, level=level)
        campaign_id = bench_campaign_id(suite_dir, path, level)
        try:
            handle = await start_campaign(client, problem, options, campaign_id=campaign_id)
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(campaign_id, result_type=Outcome)
        return await handle.result()

    console.print(f"{concurrency} campaign(s) at a time")
    problems = len(discover_suite(suite_dir))  # a broken problem file stops it here
    record_run(
        results,
        BenchRun(
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            suite_problems=problems,
            search=search_settings(options),
        ),
    )
    run = await run_suite(
        suite_dir,
        results,
        one,
        console=console,
        concurrency=concurrency,
        start_within=start_within,
    )
    files = write_bench_report(results, problems, options.gamma, settings.home)
    later = f", {len(run.deferred)} left for a later run (--start-within)" if run.deferred else ""
    console.print(
        f"{len(run.ran)} run, {len(run.skipped)} already done, {len(run.errors)} failed{later}; "
        f"report: {files.markdown} and {files.html}"
    )
    for key, error in run.errors.items():
        console.print(f"[red]{key}[/]: {error}", soft_wrap=True)
    return 0 if run.complete else 1
