"""`kernelopt`: the command line.  It only builds requests and starts or queries workflows."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from kernelopt import cli_llm
from kernelopt.cli_signals import INTERRUPTED_EXIT, StartupTrace, install_sigint_handler
from kernelopt.config import Settings
from kernelopt.contracts import (
    Budgets,
    CampaignOptions,
    CampaignPhase,
    CampaignProgress,
    Outcome,
    ProposerConfig,
    ProposerKind,
    SearchMode,
    SearchParams,
)
from kernelopt.errors import KernelOptError
from kernelopt.log import configure
from kernelopt.report import baseline_name, ceiling_text

console = Console()
err_console = Console(stderr=True)
# what the running command has started or submitted, for the Ctrl-C message
TRACE = StartupTrace()


# --- argument parsing ------------------------------------------------------------------------


def _at_least_one(text: str) -> int:
    """argparse type: a whole number >= 1 (a clear usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0 (a clear usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be at least 0 seconds, got {text}")
    return value


def _campaign_id(text: str) -> str:
    """An empty id (a shell variable that was never set) would reach Temporal as "WorkflowId is not set"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty campaign id: `kernelopt list` shows the ids")
    return text.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelopt",
        description="Make torch.compile'd models faster by searching better Triton kernels, "
        "verified through four gates, as durable Temporal workflows.",
    )
    parser.add_argument("--log-json", action="store_true", help="JSON log lines")
    parser.add_argument("--log-level", default=None)
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser("server", help="the embedded Temporal dev server")
    server.add_argument("action", choices=["start", "stop", "status"])

    import worker as worker_module

    w = sub.add_parser("worker", help="run a Temporal worker (cpu or one GPU)")
    worker_module.add_arguments(w)

    opt = sub.add_parser("optimize", help="optimise a problem file (KernelBench format)")
    opt.add_argument("file", type=Path)
    _add_campaign_options(opt)
    opt.add_argument("--id", default=None, help="campaign id (default: name + random suffix)")
    opt.add_argument("--seed", type=int, default=0)
    opt.add_argument("--no-follow", action="store_true", help="submit and return")
    opt.add_argument(
        "--skip-llm-check",
        action="store_true",
        help="submit without first asking the LLM endpoint whether it answers",
    )
    opt.add_argument("--json", action="store_true", help="print the outcome as JSON")

    tri = sub.add_parser("triage", help="library fraction and Amdahl ceiling of a problem")
    tri.add_argument("file", type=Path)
    tri.add_argument("--json", action="store_true")
    tri.add_argument("--mode", choices=[m.value for m in SearchMode], default="auto")

    ver = sub.add_parser("verify", help="run the four gates on candidates (files or folders)")
    ver.add_argument("problem", type=Path)
    ver.add_argument(
        "--candidate",
        type=Path,
        nargs="+",
        required=True,
        help="candidate files, or folders of them: several share one reference",
    )
    ver.add_argument("--json", action="store_true")
    ver.add_argument("--device", default="auto", help="auto, cuda, or cpu (gates 1-3 only)")
    ver.add_argument("--baseline-mode", default=None, help="torch.compile mode of gate 4")
    ver.add_argument("--no-perf", action="store_true", help="skip gate 4")
    ver.add_argument(
        "-v", "--verbose", action="store_true", help="print the full feedback (tracebacks)"
    )

    from kernelopt.cli_prompt import add_parser as add_prompt_parser

    add_prompt_parser(sub)
    sub.add_parser("list", help="campaigns").add_argument("--limit", type=int, default=50)
    for name, text in [
        ("show", "progress or outcome of a campaign"),
        ("cancel", "stop a campaign (the baseline is still returned)"),
        ("pause", "pause a campaign between steps"),
        ("resume", "resume a paused campaign"),
        ("audit", "every candidate, its gates and the decision"),
    ]:
        p = sub.add_parser(name, help=text)
        p.add_argument("id", type=_campaign_id)
        if name == "show":
            p.add_argument("--follow", action="store_true")
            p.add_argument("--json", action="store_true")
        if name == "audit":
            p.add_argument("--json", action="store_true")
            p.add_argument("--html", type=Path, default=None)
    bud = sub.add_parser("budget", help="change a running campaign's budgets")
    bud.add_argument("id", type=_campaign_id)
    _add_budget_options(bud)

    bench = sub.add_parser("bench", help="run a suite (KernelBench layout) and report")
    bench.add_argument("suite", type=Path)
    bench.add_argument("--results", type=Path, default=None)
    bench.add_argument(
        "--concurrency",
        type=_at_least_one,
        default=None,
        help="campaigns in flight at once (default: one per local GPU worker, else 1; "
        "on a cluster: the number of GPU workers)",
    )
    bench.add_argument(
        "--start-within",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="start no new campaign after SECONDS; the running ones finish, the rest wait "
        "for the next run (a GPU lease that ends at a known time)",
    )
    bench.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the results finished so far and stop (no server needed)",
    )
    _add_campaign_options(bench)
    cli_llm.add_parsers(sub)
    return parser


def _add_budget_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--max-usd", type=float, default=None)
    p.add_argument("--max-gpu-seconds", type=float, default=None)
    p.add_argument("--max-wall-seconds", type=float, default=None)


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=[m.value for m in SearchMode], default="auto")
    p.add_argument("--proposer", choices=[k.value for k in ProposerKind], default="auto")
    p.add_argument("--llm-base-url", default=None)
    p.add_argument("--llm-model", default=None)
    p.add_argument("--iterations", type=int, default=None, help="T (default 5)")
    p.add_argument("--plans", type=int, default=None, help="N (default 4)")
    p.add_argument("--retries", type=int, default=None, help="K (default 4)")
    p.add_argument("--beam", type=int, default=None, help="B (default 4)")
    p.add_argument("--gamma", type=float, default=1.03)
    p.add_argument("--max-targets", type=int, default=None)
    p.add_argument(
        "--gpu-heartbeat",
        type=float,
        default=None,
        metavar="S",
        help="seconds without a GPU heartbeat before a GPU activity moves to another worker "
        "(default 120; lower on preemptible machines)",
    )
    p.add_argument("--search-library-dominated", action="store_true")
    p.add_argument(
        "--share-memory", action="store_true", help="read/write experience across campaigns"
    )
    p.add_argument("--gpu-queue", default=None)
    _add_budget_options(p)


def campaign_options(args: argparse.Namespace, settings: Settings) -> CampaignOptions:
    from kernelopt.campaigns import default_gpu_queue

    params = {
        k: getattr(args, k)
        for k in ("iterations", "plans", "retries", "beam")
        if getattr(args, k) is not None
    }
    kind = ProposerKind(args.proposer)
    base_url = args.llm_base_url or settings.llm_base_url
    if kind == ProposerKind.AUTO:
        # decided here, where the environment is known: an endpoint or a key means the LLM
        has_key = bool(os.environ.get(settings.llm_api_key_env))
        folder = settings.llm_mode == "folder"  # replies come from files: no endpoint needed
        kind = ProposerKind.LLM if (base_url or has_key or folder) else ProposerKind.BUILTIN
    proposer = ProposerConfig(
        kind=kind,
        base_url=base_url,
        model=args.llm_model or settings.llm_model,
        api_key_env=settings.llm_api_key_env,
        temperature=settings.llm_temperature,
        **cli_llm.proposer_fields(settings),
    )
    needs_endpoint = proposer.kind == ProposerKind.LLM and settings.llm_mode != "folder"
    if needs_endpoint and not (proposer.base_url or has_key_or_url(settings)):
        raise KernelOptError(
            "--proposer llm needs an endpoint or a key: --llm-base-url / KERNELOPT_LLM_BASE_URL / "
            f"OPENAI_BASE_URL, or {settings.llm_api_key_env} for OpenAI itself"
        )
    return CampaignOptions(
        mode=SearchMode(args.mode),
        search=SearchParams(**params),
        proposer=proposer,
        budgets=_budgets(args),
        gamma=args.gamma,
        search_library_dominated=args.search_library_dominated,
        share_memory=args.share_memory,
        cpu_queue=settings.cpu_queue,
        gpu_queue=args.gpu_queue or default_gpu_queue(settings),
        max_targets=args.max_targets,
        gpu_heartbeat_s=args.gpu_heartbeat,
    )


def has_key_or_url(settings: Settings) -> bool:
    return bool(settings.llm_base_url or os.environ.get(settings.llm_api_key_env))


def _budgets(args: argparse.Namespace) -> Budgets:
    return Budgets(
        max_tokens=args.max_tokens,
        max_usd=args.max_usd,
        max_gpu_seconds=args.max_gpu_seconds,
        max_wall_seconds=args.max_wall_seconds,
    )


# --- commands --------------------------------------------------------------------------------
def cmd_server(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.local_workers import stop_local_workers
    from kernelopt.temporal_server import EmbeddedServer

    if not settings.embedded:
        console.print(
            f"KERNELOPT_TEMPORAL_ADDRESS is set ({settings.temporal_address}): "
            "kernelopt does not manage that server"
        )
        return 2
    server = EmbeddedServer(settings)
    if args.action == "start":
        console.print(server.start().describe())
    elif args.action == "stop":
        stopped = stop_local_workers(settings)
        if stopped:
            console.print(f"stopped local workers: {', '.join(stopped)}")
        console.print("stopped" if server.stop() else "not running")
    else:
        status = server.status()
        console.print(status.describe())
        return 0 if status.running else 3
    return 0


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
        err_console.print("starting the Temporal dev server in the background ...")
        TRACE.started.append("the Temporal dev server")  # an interrupt may land mid-start
        status = await asyncio.to_thread(server.start)
    client = await connect(settings, start_embedded=False)
    before = set(await asyncio.to_thread(running, settings))
    alive = await asyncio.to_thread(ensure_local_workers, settings)
    new = sorted(set(alive) - before)
    if new:
        TRACE.started.append("the workers")
    lines = []
    if "the Temporal dev server" in TRACE.started:
        lines.append(f"  Temporal dev server at {status.address}, log {status.log_path}")
    if new:
        logs = settings.home / "workers"
        lines.append(f"  workers {', '.join(new)}, logs {logs}/<name>.log")
    if lines:
        err_console.print(
            "started in the background (they keep running; `kernelopt server stop` stops them):\n"
            + "\n".join(lines)
            + f"\n  Temporal UI: {status.ui_url}",
            highlight=False,
            soft_wrap=True,
        )
    if not any(name.startswith("gpu") for name in alive):
        err_console.print(
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
    await asyncio.to_thread(preflight, args.file)
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
    TRACE.submitted = handle.id
    if options.proposer.kind == ProposerKind.LLM:
        proposer = f"LLM {options.proposer.model} @ {options.proposer.base_url or 'api.openai.com'}"
    else:
        proposer = "built-in (no LLM endpoint configured: launch-configuration search)"
    err_console.print(f"campaign [bold]{handle.id}[/] submitted; proposer: {proposer}")
    if args.no_follow:
        console.print(handle.id)
        return 0
    outcome = await follow(client, handle, err_console, options.gpu_queue)
    if outcome is None:
        return 0
    print_outcome(outcome, args.json, settings.home)
    return 0


def print_outcome(outcome: Outcome, as_json: bool, home: Path | None = None) -> None:
    """The outcome as a two-column table (or JSON); the report as a file one can open."""
    from kernelopt.campaign_status import report_path, was_cancelled

    if as_json:
        console.print_json(outcome.model_dump_json())
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
    if outcome.stop_reason:
        table.add_row("stopped early", outcome.stop_reason)
    if outcome.baseline_ms is not None:
        table.add_row("baseline", f"{outcome.baseline_ms:.4f} ms")
    if outcome.optimized_ms is not None:
        table.add_row("optimized", f"{outcome.optimized_ms:.4f} ms")
    if outcome.triage is not None:
        t = outcome.triage
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
    console.print(table)


async def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.campaign_status import status_of
    from workflows.optimize_model import SA_BEST, SA_OUTCOME, SA_PHASE

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
    console.print(campaign_table(rows, console.width))
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
        console.print(f"campaign {args.id}: {desc.status.name.lower()}")
        return 1
    gpu_queue = default_gpu_queue(settings)
    if args.follow:
        outcome = await follow(client, handle, err_console, gpu_queue)
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
        console.print_json(data=data | {"waiting": hint})
        return 0
    elapsed = (datetime.now(UTC) - desc.start_time).total_seconds() if desc.start_time else 0.0
    if progress is None:
        console.print(f"campaign {args.id}: running, not started yet ({elapsed:.0f} s)")
        if hint:
            console.print(hint, style="yellow")
        return 0
    console.print(render(progress, hint, elapsed))
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
        console.print(f"{args.id}: stopping; {returns}")
    else:
        await handle.signal(args.command)
        console.print(f"{args.id}: {args.command}d")
    return 0


async def cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    from temporalio.client import WorkflowUpdateFailedError

    client = await _client(settings)
    handle = client.get_workflow_handle(args.id, result_type=Outcome)
    progress = await handle.query("progress", result_type=CampaignProgress)
    current = progress.budgets.model_dump()
    changes = _budgets(args).model_dump(exclude_none=True)
    current.update(changes)
    try:
        result = await handle.execute_update("set_budgets", Budgets(**current), result_type=Budgets)
    except WorkflowUpdateFailedError as exc:
        cause = getattr(exc.cause, "message", None) or str(exc.cause or exc)
        raise KernelOptError(f"budget change refused: {cause}") from exc
    console.print(f"{args.id}: budgets now {result.model_dump()}")
    return 0


def cmd_triage(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli_triage import triage_command

    return triage_command(args.file, args.json, args.mode)


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli_verify import verify_command

    if len(args.candidate) > 1 or args.candidate[0].is_dir():
        from kernelopt.cli_verify import verify_many_command

        return verify_many_command(
            args.problem,
            args.candidate,
            args.json,
            device=args.device,
            baseline_mode=args.baseline_mode,
            run_perf=not args.no_perf,
        )
    return verify_command(
        args.problem,
        args.candidate[0],
        args.json,
        device=args.device,
        baseline_mode=args.baseline_mode,
        run_perf=not args.no_perf,
        verbose=args.verbose,
    )


async def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.audit import audit_command
    from kernelopt.campaigns import default_gpu_queue
    from kernelopt.client import ServerStopped

    try:
        client = await _client(settings)
    except ServerStopped as exc:  # the exported history in the artifact store still answers
        err_console.print(f"{exc}; auditing from the artifact store's export", highlight=False)
        client = None
    return await audit_command(
        client, args.id, as_json=args.json, html=args.html, gpu_queue=default_gpu_queue(settings)
    )


async def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.bench.cli import bench_command, results_dir_for, write_bench_report
    from kernelopt.bench.suite import discover_suite

    options = campaign_options(args, settings)
    if args.report_only:
        problems = len(discover_suite(args.suite, strict=False))
        results = results_dir_for(args.suite, args.results)
        files = write_bench_report(results, problems, options.gamma)
        console.print(f"report: {files.markdown} and {files.html}")
        return 0
    from kernelopt.client import connect

    client = await connect(settings)  # bench submits campaigns: it starts the server
    return await bench_command(
        client,
        settings,
        args.suite,
        args.results,
        options,
        concurrency=args.concurrency,
        start_within=args.start_within,
    )


ASYNC = {
    "optimize": cmd_optimize,
    "list": cmd_list,
    "show": cmd_show,
    "cancel": cmd_signal,
    "pause": cmd_signal,
    "resume": cmd_signal,
    "budget": cmd_budget,
    "audit": cmd_audit,
    **cli_llm.ASYNC,
    "bench": cmd_bench,
}


def cmd_prompt(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli_prompt import cmd_prompt as render_prompt

    return render_prompt(args, settings)


SYNC = {"server": cmd_server, "triage": cmd_triage, "verify": cmd_verify, "prompt": cmd_prompt}


def main(argv: Sequence[str] | None = None) -> int:
    install_sigint_handler()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "worker":
        import worker as worker_module

        return worker_module.run_from_args(args)
    settings = Settings.from_env(log_json=args.log_json or None, log_level=args.log_level)
    if args.log_level is None and "KERNELOPT_LOG_LEVEL" not in os.environ:
        settings = settings.model_copy(update={"log_level": "warning"})
    configure(json=settings.log_json, level=settings.log_level)
    try:
        if args.command in SYNC:
            return SYNC[args.command](args, settings)
        return asyncio.run(ASYNC[args.command](args, settings))
    except KernelOptError as exc:
        err_console.print(
            f"[red]kernelopt {args.command}:[/] {exc}", highlight=False, soft_wrap=True
        )
        return 2
    except RPCError as exc:
        hint = ""
        if exc.status == RPCStatusCode.NOT_FOUND:  # also what a signal to a finished one gets
            hint = (
                " (`kernelopt show ID` shows its outcome)"
                if "completed" in exc.message
                else " (`kernelopt list` shows the campaigns on this server)"
            )
        err_console.print(
            f"[red]kernelopt {args.command}:[/] Temporal said: {exc.message}{hint}",
            highlight=False,
            soft_wrap=True,
        )
        return 2
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]{TRACE.interrupted_message(args.command)}[/]", highlight=False, soft_wrap=True
        )
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
