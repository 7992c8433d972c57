"""`kernelopt`: the command line.  It only builds requests and starts or queries workflows.

``main`` parses the arguments and dispatches to one command function; the
campaign commands live in ``campaign_commands``, the others in their own
modules of this package.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

from temporalio.service import RPCError, RPCStatusCode

from kernelopt.cli import llm_replies, output
from kernelopt.cli.campaign_commands import (
    cmd_audit,
    cmd_budget,
    cmd_list,
    cmd_optimize,
    cmd_show,
    cmd_signal,
)
from kernelopt.cli.interrupts import INTERRUPTED_EXIT, install_sigint_handler
from kernelopt.cli.parser import build_parser, campaign_options
from kernelopt.cli.process_exit import ExitBeforeFinalizing
from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from kernelopt.log import configure


def cmd_server(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.local_workers import stop_local_workers
    from kernelopt.temporal_server import EmbeddedServer

    if not settings.embedded:
        output.console.print(
            f"KERNELOPT_TEMPORAL_ADDRESS is set ({settings.temporal_address}): "
            "kernelopt does not manage that server"
        )
        return 2
    server = EmbeddedServer(settings)
    if args.action == "start":
        output.console.print(server.start().describe())
    elif args.action == "stop":
        stopped = stop_local_workers(settings)
        if stopped:
            output.console.print(f"stopped local workers: {', '.join(stopped)}")
        output.console.print("stopped" if server.stop() else "not running")
    else:
        status = server.status()
        output.console.print(status.describe())
        return 0 if status.running else 3
    return 0


def cmd_triage(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli.triage import triage_command

    return triage_command(args.file, args.json, args.mode)


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli.verify import verify_command

    if len(args.candidate) > 1 or args.candidate[0].is_dir():
        from kernelopt.cli.verify import verify_many_command

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


async def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.bench.suite import discover_suite
    from kernelopt.cli.bench import bench_command, results_dir_for, write_bench_report

    options = campaign_options(args, settings)
    if args.report_only:
        problems = len(discover_suite(args.suite, strict=False))
        results = results_dir_for(args.suite, args.results)
        files = write_bench_report(results, problems, options.gamma)
        output.console.print(f"report: {files.markdown} and {files.html}")
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


# the commands that talk to Temporal (``pending`` only reads files): they run under
# asyncio.run and, as the process's entry point, end through ``ExitBeforeFinalizing``
ASYNC = {
    "optimize": cmd_optimize,
    "list": cmd_list,
    "show": cmd_show,
    "cancel": cmd_signal,
    "pause": cmd_signal,
    "resume": cmd_signal,
    "budget": cmd_budget,
    "audit": cmd_audit,
    **llm_replies.ASYNC,
    "bench": cmd_bench,
}


def cmd_prompt(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli.prompt import cmd_prompt as render_prompt

    return render_prompt(args, settings)


def cmd_state(args: argparse.Namespace, settings: Settings) -> int:
    from kernelopt.cli.state import cmd_state as run_state

    return run_state(args, settings)


SYNC = {
    "server": cmd_server,
    "triage": cmd_triage,
    "verify": cmd_verify,
    "prompt": cmd_prompt,
    "state": cmd_state,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit status.

    Called without ``argv`` this is the process's entry point (the ``kernelopt``
    script, ``python -m kernelopt.cli``): a command that talks to Temporal then ends
    the process itself, before interpreter finalisation (``process_exit`` says why).
    Called with ``argv`` (tests, other Python code) it only returns.
    """
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
    if argv is None and args.command in ASYNC:
        with ExitBeforeFinalizing() as ending:
            ending.code = run_command(args, settings)
        return ending.code
    return run_command(args, settings)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    """Dispatch to the command; the errors a user can act on become one line and status 2."""
    try:
        if args.command in SYNC:
            return SYNC[args.command](args, settings)
        return asyncio.run(ASYNC[args.command](args, settings))
    except KernelOptError as exc:
        output.err_console.print(
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
        output.err_console.print(
            f"[red]kernelopt {args.command}:[/] Temporal said: {exc.message}{hint}",
            highlight=False,
            soft_wrap=True,
        )
        return 2
    except KeyboardInterrupt:
        output.err_console.print(
            f"[yellow]{output.TRACE.interrupted_message(args.command)}[/]",
            highlight=False,
            soft_wrap=True,
        )
        return INTERRUPTED_EXIT
