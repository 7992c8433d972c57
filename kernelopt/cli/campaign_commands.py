"""Campaign commands: ``optimize``, ``list``, ``show``, ``cancel``/``pause``/``resume``,
``budget`` and ``audit``.  Each builds a request and starts, queries or signals a workflow.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.table import Table
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from kernelopt.cli import output
from kernelopt.cli.parser import budgets_from_args, campaign_options
from kernelopt.config import Settings
from kernelopt.contracts import (
    Budgets,
    CampaignPhase,
    CampaignProgress,
    Outcome,
    ProposerKind,
)
from kernelopt.errors import KernelOptError
from kernelopt.report import baseline_name, ceiling_text


async def _client(settings: Settings):
    """For commands that read or steer campaigns: never starts the embedded server."""
    from kernelopt.client import connect_running

    return await connect_running(settings)


async def _start_background(settings: Settings, gpu_queue: str):
    """Start what ``optimize`` needs (server, workers) and say once what started and where."""
    from kernelopt.client import connect
    from kernelopt.local_workers import ensure_local_workers, running
    from kernelopt.temporal_server import EmbeddedServer

    if not settings.embedded:
        return await connect(settings)
    server = EmbeddedServer(settings)
    status = await asyncio.to_thread(server.status)
    if not status.running:
        output.err_console.print("starting the Temporal dev server in the background ...")
        output.TRACE.started.append("the Temporal dev server")  # an interrupt may land mid-start
        status = await asyncio.to_thread(server.start)
    client = await connect(settings, start_embedded=False)
    before = set(await asyncio.to_thread(running, settings))
    alive = await asyncio.to_thread(ensure_local_workers, settings)
    new = sorted(set(alive) - before)
    if new:
        output.TRACE.started.append("the workers")
    lines = []
    if "the Temporal dev server" in output.TRACE.started:
        lines.append(f"  Temporal dev server at {status.address}, log {status.log_path}")
    if new:
        logs = settings.home / "workers"
        lines.append(f"  workers {', '.join(new)}, logs {logs}/<name>.log")
    if lines:
        output.err_console.print(
            "started in the background (they keep running; `kernelopt server stop` stops them):\n"
            + "\n".join(lines)
            + f"\n  Temporal UI: {status.ui_url}",
            highlight=False,
            soft_wrap=True,
        )
    if not any(name.startswith("gpu") for name in alive):
        output.err_console.print(
            "[yellow]no CUDA GPU here[/]: the campaign will wait for a GPU worker "
            f"on queue '{gpu_queue}'"
        )
    return client


async def cmd_optimize(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.campaigns import prepare_problem, start_campaign
    from kernelopt.follow import follow
    from kernelopt.preflight_problem import preflight
    from kernelopt.store import open_store

    problem = prepare_problem(args.file, open_store(settings.artifacts_dir), seed=args.seed)
    # import and build it once on the CPU, time-limited: nothing is submitted otherwise
    unchecked = await asyncio.to_thread(preflight, args.file, one_shape=True)
    if unchecked:
        output.err_console.print(f"[yellow]note[/]: {args.file}: {unchecked}", highlight=False)
    options = campaign_options(args, settings)
    asks_endpoint = options.proposer.mode != "folder"
    if options.proposer.kind == ProposerKind.LLM and asks_endpoint and not args.skip_llm_check:
        from kernelopt.agents.preflight import llm_endpoint_problem

        problem_text = await llm_endpoint_problem(options.proposer)
        if problem_text:
            raise KernelOptError(
                f"LLM endpoint check failed: {problem_text} (--skip-llm-check submits anyway)"
            )
    client = await _start_background(settings, options.gpu_queue)
    handle = await start_campaign(client, problem, options, campaign_id=args.id)
    output.TRACE.submitted = handle.id
    if options.proposer.kind == ProposerKind.LLM:
        proposer = f"LLM {options.proposer.model} @ {options.proposer.base_url or 'api.openai.com'}"
    else:
        proposer = "built-in (no LLM endpoint configured: templates, rewrites, launch configs)"
    output.err_console.print(f"campaign [bold]{handle.id}[/] submitted; proposer: {proposer}")
    if args.no_follow:
        output.console.print(handle.id)
        return 0
    outcome = await follow(client, handle, output.err_console, options.gpu_queue)
    if outcome is None:
        return 0
    print_outcome(outcome, args.json, settings.home)
    return 0


def print_outcome(outcome: Outcome, as_json: bool, home: Path | None = None) -> None:
    """The outcome as a two-column table (or JSON); the report as a file one can open."""
    from kernelopt.campaign_status import report_path, was_cancelled

    if as_json:
        output.console.print_json(outcome.model_dump_json())
        return
    table = Table(title=f"campaign {outcome.campaign_id}", show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    if was_cancelled(outcome):
        table.add_row("status", "[bold yellow]cancelled[/]")
    else:
        table.add_row("outcome", f"[bold]{outcome.category.value}[/]")
    if outcome.wrapper is None and outcome.baseline_ms is None:  # stopped before compile
        table.add_row("speedup", "- (no baseline was built)")
    else:
        table.add_row("speedup", f"{outcome.speedup:.3f}x over {baseline_name(outcome, quote='')}")
    table.add_row("reason", outcome.reason)
    if outcome.wrapper is not None:
        table.add_row("returned model", returned_model(outcome, home))
    if outcome.stop_reason:
        table.add_row("stopped early", outcome.stop_reason)
    if outcome.baseline_ms is not None:
        table.add_row("baseline", f"{outcome.baseline_ms:.4f} ms")
    if outcome.optimized_ms is not None:
        table.add_row("optimized", f"{outcome.optimized_ms:.4f} ms")
    t = outcome.triage or outcome.triage_ref  # both carry f and the ceilings
    if t is not None:
        table.add_row(
            "library fraction f",
            f"{t.library_fraction:.3f} (ceiling {ceiling_text(t.ceilings.get('inf'))})",
        )
    table.add_row("proposer", outcome.proposer)
    table.add_row(
        "candidates",
        f"{outcome.candidates_tried} tried, {outcome.candidates_accepted} passed gates 1-2",
    )
    if outcome.report is not None:
        path = report_path(outcome, home) if home is not None else None
        table.add_row(
            "report",
            str(path) if path else f"artifact {outcome.report.sha256[:16]} ({outcome.report.name})",
        )
    output.console.print(table)


def returned_model(outcome: Outcome, home: Path | None = None) -> str:
    """Where the returned model is (a file, or its digest where this machine's store lacks
    it), and in which form."""
    from kernelopt.campaign_status import model_path

    ref = outcome.wrapper
    if ref is None:
        return "-"
    path = model_path(outcome, home) if home is not None else None
    where = str(path) if path else f"artifact {ref.sha256[:16]} ({ref.name})"
    return f"{where}: {outcome.returned_form().replace('`', '')}"


async def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.campaign_status import status_of
    from kernelopt.contracts.search_attributes import SA_BEST, SA_OUTCOME, SA_PHASE

    client = await _client(settings)
    rows: list[list[str]] = []
    async for wf in client.list_workflows(f"WorkflowType = '{'OptimizeModel'}'"):
        sa = wf.typed_search_attributes
        best = sa.get(SA_BEST)
        status = wf.status.name.lower() if wf.status else "-"
        outcome_name = sa.get(SA_OUTCOME) or "-"
        if status == "completed" and outcome_name == "fallback":
            # a cancel also ends in the baseline: only the outcome's reason tells them apart
            outcome = await client.get_workflow_handle(wf.id, result_type=Outcome).result()
            status = status_of(status, outcome)
            if status == "cancelled":
                outcome_name = "-"
        rows.append(
            [
                wf.id,
                status,
                wf.start_time.astimezone().strftime("%Y-%m-%d %H:%M"),
                sa.get(SA_PHASE) or "-",
                outcome_name,
                f"{best:.3f}x" if best else "-",
            ]
        )
        if len(rows) >= args.limit:
            break
    output.console.print(campaign_table(rows, output.console.width))
    return 0


def campaign_table(rows: list[list[str]], width: int) -> Table:
    """The listing; the id is what a user copies into show/cancel/audit: never cut it.

    No cell is cut or wrapped mid-word: at narrow widths the phase column goes first
    (a finished campaign's phase is "done" anyway), then the start time, then the best
    speedup (``show ID`` has it).
    """
    columns = ["campaign", "status", "start", "phase", "outcome", "best"]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    for drop in (3, 2, 5):  # phase, start, best
        if sum(widths[i] + 3 for i in keep) + 1 <= width:
            break
        keep.remove(drop)
    table = Table()
    for i in keep:
        table.add_column(columns[i], no_wrap=True, min_width=widths[i] if i == 0 else None)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from temporalio.client import WorkflowExecutionStatus

    from kernelopt.campaigns import default_gpu_queue
    from kernelopt.follow import follow, render, waiting_text

    client = await _client(settings)
    handle = client.get_workflow_handle(args.id, result_type=Outcome)
    desc = await handle.describe()
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        print_outcome(await handle.result(), args.json, settings.home)
        return 0
    if desc.status != WorkflowExecutionStatus.RUNNING:
        output.console.print(f"campaign {args.id}: {desc.status.name.lower()}")
        return 1
    gpu_queue = default_gpu_queue(settings)
    if args.follow:
        outcome = await follow(client, handle, output.err_console, gpu_queue)
        if outcome is not None:
            print_outcome(outcome, args.json, settings.home)
        return 0
    try:
        progress = await handle.query("progress", result_type=CampaignProgress)
    except (RPCError, WorkflowQueryFailedError):
        progress = None  # no workflow task has run yet: no worker polls its queue
    hint = await waiting_text(client, handle, progress, gpu_queue, desc.task_queue)
    if args.json:
        data = progress.model_dump(mode="json") if progress else {"campaign_id": args.id}
        output.console.print_json(data=data | {"waiting": hint})
        return 0
    elapsed = (datetime.now(UTC) - desc.start_time).total_seconds() if desc.start_time else 0.0
    if progress is None:
        output.console.print(f"campaign {args.id}: running, not started yet ({elapsed:.0f} s)")
        if hint:
            output.console.print(hint, style="yellow")
        return 0
    output.console.print(render(progress, hint, elapsed))
    return 0


async def _what_cancel_returns(handle) -> str:
    """A campaign stopped before its compile step finished has no baseline to return."""
    try:
        progress = await handle.query("progress", result_type=CampaignProgress)
    except (RPCError, WorkflowQueryFailedError):
        return "the compiler's baseline will be returned (if it was built)"
    if progress.phase in (CampaignPhase.QUEUED, CampaignPhase.COMPILING):
        return "it had not finished compiling, so it ends without a baseline"
    return "the compiler's baseline will be returned"


async def cmd_signal(args: argparse.Namespace, settings: Settings) -> int:
    client = await _client(settings)
    handle = client.get_workflow_handle(args.id, result_type=Outcome)
    if args.command == "cancel":
        returns = await _what_cancel_returns(handle)  # before the stop moves it on
        await handle.signal("stop", "cancelled by user")
        output.console.print(f"{args.id}: stopping; {returns}")
    else:
        await handle.signal(args.command)
        output.console.print(f"{args.id}: {args.command}d")
    return 0


async def cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.client import WorkflowUpdateFailedError

    client = await _client(settings)
    handle = client.get_workflow_handle(args.id, result_type=Outcome)
    progress = await handle.query("progress", result_type=CampaignProgress)
    current = progress.budgets.model_dump()
    changes = budgets_from_args(args).model_dump(exclude_none=True)
    current.update(changes)
    try:
        result = await handle.execute_update("set_budgets", Budgets(**current), result_type=Budgets)
    except WorkflowUpdateFailedError as exc:
        cause = getattr(exc.cause, "message", None) or str(exc.cause or exc)
        raise KernelOptError(f"budget change refused: {cause}") from exc
    output.console.print(f"{args.id}: budgets now {result.model_dump()}")
    return 0


async def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.campaigns import default_gpu_queue
    from kernelopt.cli.audit import audit_command
    from kernelopt.client import ServerStopped

    try:
        client = await _client(settings)
    except ServerStopped as exc:  # the exported history in the artifact store still answers
        output.err_console.print(
            f"{exc}; auditing from the artifact store's export", highlight=False
        )
        client = None
    return await audit_command(
        client, args.id, as_json=args.json, html=args.html, gpu_queue=default_gpu_queue(settings)
    )
