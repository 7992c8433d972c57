"""``start``, ``resume`` and ``report``: one call of the evaluation each."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from kernelopt.config import Settings
from kernelopt.contracts import CampaignOptions
from kernelopt.errors import KernelOptError
from kernelopt.store import write_atomic
from scripts.llm_eval.packing import (
    Snapshotter,
    diagnostic_refs,
    export_home,
    pack_logs,
    pack_requests,
)
from scripts.llm_eval.record import (
    EvalCall,
    EvalManifest,
    EvalProblem,
    idle_without_replies,
    load_manifest,
    manifest_path,
    save_manifest,
)
from scripts.llm_eval.replies import deliver_replies, reply_files
from scripts.llm_eval.report import report_markdown, report_rows
from scripts.llm_eval.services import ROOT, Site, stop_leftovers
from scripts.llm_eval.stream import Stream, now
from scripts.llm_eval.watch import run_until_settled

WAIT_LIMIT_S = 30 * 86400.0  # an unanswered request ends its search after this (default: a day)
# a device call carries 64 MiB in all, and the tree, .whl and .device take ~57 of them
CARRY_WARN_BYTES = 6 << 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _settings(args: argparse.Namespace) -> Settings:
    """The environment's settings in folder mode; KERNELOPT_HOME must be chosen explicitly."""
    if not os.environ.get("KERNELOPT_HOME"):
        raise KernelOptError("set KERNELOPT_HOME to the (empty) home this call may use")
    return Settings.from_env(llm_mode="folder", llm_wait_limit_s=WAIT_LIMIT_S)


def _out(args: argparse.Namespace) -> Path:
    out = args.out or os.environ.get("OUT")
    if not out:
        raise KernelOptError("--out DIR (or $OUT) is needed")
    return Path(out)


def campaign_options_for(args: argparse.Namespace, settings: Settings) -> CampaignOptions:
    """The CLI's own option building (``kernelopt bench``'s flags), LLM proposer in folder mode.

    ``--proposer builtin`` runs the same chain of calls without any request: a
    campaign carried across machine loans (issue 31) rather than an evaluation.
    """
    from kernelopt.cli.parser import build_parser, campaign_options

    proposer = getattr(args, "proposer", "llm")
    argv = ["bench", str(ROOT / "problems"), "--proposer", proposer, "--mode", args.mode]
    argv += ["--iterations", str(args.rounds), "--plans", str(args.plans)]
    argv += ["--retries", str(args.retries), "--beam", str(args.beam)]
    argv += ["--gamma", str(args.gamma), "--llm-model", args.llm_model]
    if args.max_targets:
        argv += ["--max-targets", str(args.max_targets)]
    if args.max_gpu_seconds:
        argv += ["--max-gpu-seconds", str(args.max_gpu_seconds)]
    return campaign_options(build_parser().parse_args(argv), settings)


def _level(path: Path) -> int | None:
    name = path.resolve().parent.name
    return int(name[5:]) if name.startswith("level") and name[5:].isdigit() else None


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


async def submit_all(
    client: Client,
    settings: Settings,
    paths: list[Path],
    options: CampaignOptions,
    stream: Stream,
) -> list[EvalProblem]:
    """Preflight every file (in parallel, on the CPU) and submit one campaign per good one."""
    from kernelopt.campaigns import prepare_problem, start_campaign
    from kernelopt.preflight_problem import preflight
    from kernelopt.store import open_store

    store = open_store(settings.artifacts_dir)
    checks = await asyncio.gather(
        *(asyncio.to_thread(preflight, p) for p in paths), return_exceptions=True
    )
    problems = []
    for path, check in zip(paths, checks, strict=True):
        problem = EvalProblem(path=_shown(path), name=path.stem, level=_level(path))
        problems.append(problem)
        if isinstance(check, BaseException):
            problem.error = str(check)[:500]
            stream.event("problem_rejected", problem=problem.name, error=problem.error)
            continue
        spec = prepare_problem(path, store, level=problem.level)
        handle = await start_campaign(client, spec, options)
        problem.campaign_id = handle.id
        stream.event("campaign_submitted", problem=problem.name, id=handle.id)
    return problems


async def run_call(
    command: str,
    args: argparse.Namespace,
    settings: Settings,
    stream: Stream,
    work: Path,
    prepare: Any,
) -> int:
    """Everything one call does around ``prepare`` (submitting, or delivering replies)."""
    deadline = stream.started + args.budget_s  # from the process's start: imports, restore
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    from kernelopt.campaigns import default_gpu_queue

    call = EvalCall(command=command, host=socket.gethostname(), started_at=now())
    site = Site(settings, args.extra_worker, stream)
    stopped, looks = "", []
    manifest: EvalManifest | None = None
    try:
        client = await site.up(default_gpu_queue(settings))
        manifest = await prepare(client, call)
        manifest.calls.append(call)  # filled in below; the tables count this call
        gpu_queue = manifest.options.get("gpu_queue") or default_gpu_queue(settings)
        snapshot = Snapshotter(settings, stream, work, args.snapshot_s, client, manifest, call)
        stopped, looks = await run_until_settled(
            client, manifest, settings, gpu_queue, stream, deadline, stop, snapshot, site
        )
        stream.event("loop_ended", why=stopped)
    except BaseException as exc:
        stopped = f"failed: {type(exc).__name__}"
        stream.event("failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        site.stop_workers()
        rows, diagnostics = await closing_rows(site, settings, manifest, stream)
        site.stop_server()
        end_call(call, stopped, looks, stream)
        if rows is not None:  # after end_call: this call's row shows how it really ended
            stream.table(report_markdown(rows, manifest, f"llm_eval after {command}"))
    save_manifest(settings, manifest)
    all_finished = bool(looks) and all(look.state not in ("running", "waiting") for look in looks)
    size = export_home(settings, work, stream, all_finished, diagnostics)
    waiting = pack_requests(settings, stream, work)
    pack_logs(settings, stream, work)
    summary = {
        "command": command,
        "stopped": stopped,
        "seconds": call.seconds,
        "all_finished": all_finished,
        "home_tgz_bytes": size,
        "requests_waiting": waiting,
        "replies_delivered": call.replies_delivered,
        "replies_skipped": call.replies_skipped,
        "states": call.states,
        "rows": rows or [],
    }
    if size > CARRY_WARN_BYTES:
        summary["warning"] = (
            f"home.tgz is {size / 2**20:.1f} MiB: a file comes back from the device only up to "
            "16 MiB, and the next call carries it beside the tree, .whl and .device (64 MiB in all)"
        )
        stream.event("warning", text=summary["warning"])
    write_atomic(stream.out / "summary.json", json.dumps(summary, indent=1, default=str).encode())
    finished = sum(1 for look in looks if look.state == "finished")
    stream.event(
        "packed",
        home_tgz_bytes=size,
        requests_waiting=len(waiting),
        finished=finished,
        campaigns=len(looks),
        seconds=round(stream.elapsed, 1),
    )
    return 0


async def closing_rows(
    site: Site, settings: Settings, manifest: EvalManifest | None, stream: Stream
) -> tuple[list[dict[str, Any]] | None, set[str]]:
    """The report's rows (None: not read) and the raw ncu reports' digests, read while
    the server still runs."""
    rows, diagnostics = None, set()
    if manifest is None or site.client is None:
        return rows, diagnostics
    try:
        rows = await asyncio.wait_for(report_rows(site.client, settings, manifest), 90)
        diagnostics = await asyncio.wait_for(diagnostic_refs(site.client, manifest), 60)
    except (TimeoutError, KernelOptError, RPCError) as exc:
        stream.event("table_failed", error=str(exc)[:300])
    return rows, diagnostics


def end_call(call: EvalCall, stopped: str, looks: list[Any], stream: Stream) -> None:
    """The call's real ending and its final seconds, once the services have stopped.

    A live snapshot wrote ``cut? ...`` into the call so that a call the device limit
    kills still says so; a call that got here was not cut, and progress.md, summary.json
    and the manifest in the final home.tgz must all say how it ended instead.
    """
    call.seconds = round(stream.elapsed, 1)
    call.stopped = stopped
    call.states = {look.campaign_id: f"{look.state} {look.detail}".strip() for look in looks}


@contextlib.contextmanager
def said(stream: Stream):
    """A failure before or around the run is an event too: $OUT says why the call ended."""
    try:
        yield
    except (KernelOptError, OSError) as exc:
        if not stream.failed:
            stream.event("failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise


_Body = Callable[[argparse.Namespace, Settings, Stream, Path], Awaitable[int]]


async def _with_stream(args: argparse.Namespace, body: _Body) -> int:
    """``body`` with the call's settings, its event stream and a scratch folder: start and
    resume open and close them alike."""
    settings = _settings(args)
    stream = Stream(_out(args))
    try:
        with said(stream), tempfile.TemporaryDirectory(prefix="llm-eval-") as work:
            return await body(args, settings, stream, Path(work))
    finally:
        stream.close()


async def cmd_start(args: argparse.Namespace) -> int:
    return await _with_stream(args, _start)


async def _start(args: argparse.Namespace, settings: Settings, stream: Stream, work: Path) -> int:
    await asyncio.to_thread(stop_leftovers, stream)
    if (settings.server_dir / "temporal.db").exists() or manifest_path(settings).exists():
        raise KernelOptError(f"{settings.home} already holds state: start wants an empty home")
    options = campaign_options_for(args, settings)
    paths = [Path(p) for p in args.problems]
    stream.event(
        "start",
        home=str(settings.home),
        problems=[_shown(p) for p in paths],
        search=options.search.model_dump(
            mode="json", include={"iterations", "plans", "retries", "beam"}
        ),
        max_targets=options.max_targets,
        gpu_queue=options.gpu_queue,
    )

    async def prepare(client: Client, call: EvalCall) -> EvalManifest:
        manifest = EvalManifest(
            created_at=now(), rounds=args.rounds, options=options.model_dump(mode="json")
        )
        manifest.problems = await submit_all(client, settings, paths, options, stream)
        save_manifest(settings, manifest)
        return manifest

    return await run_call("start", args, settings, stream, work, prepare)


async def cmd_resume(args: argparse.Namespace) -> int:
    return await _with_stream(args, _resume)


async def _resume(args: argparse.Namespace, settings: Settings, stream: Stream, work: Path) -> int:
    from kernelopt.state_transfer import import_state
    from kernelopt.thin_home import redraw_left_out

    await asyncio.to_thread(stop_leftovers, stream)
    files = reply_files(Path(args.replies), work) if args.replies else []
    restored = import_state(settings, Path(args.home), force=args.force)
    stream.event(
        "restored",
        home=str(settings.home),
        archive_sha256=restored.archive_sha256[:12],
        exported_from=restored.manifest.source,
        warnings=restored.warnings,
        reply_files=len(files),
    )
    idle = idle_without_replies(load_manifest(settings), len(files))
    if idle is not None:
        raise KernelOptError(idle)
    if restored.manifest.left_out:  # a thin home: its seed-drawn tensors are drawn again here
        redrawn = await asyncio.to_thread(redraw_left_out, settings)
        stream.event("regenerated", blobs=redrawn.blobs, seconds=redrawn.seconds)

    async def prepare(client: Client, call: EvalCall) -> EvalManifest:
        manifest = load_manifest(settings)
        call.replies_delivered, call.replies_skipped = await deliver_replies(
            settings, files, stream
        )
        return manifest

    return await run_call("resume", args, settings, stream, work, prepare)


@contextlib.asynccontextmanager
async def _restored(home_tgz: Path):
    """A client of a private copy of ``home_tgz``'s state: its own server, no workers."""
    from kernelopt.client import connect
    from kernelopt.state_transfer import import_state
    from kernelopt.temporal_server import EmbeddedServer

    with tempfile.TemporaryDirectory(prefix="llm-eval-report-") as tmp:
        settings = Settings(home=Path(tmp) / "home", server_port=_free_port(), ui_port=_free_port())
        import_state(settings, home_tgz)
        server = EmbeddedServer(settings)
        await asyncio.to_thread(server.start)
        try:
            yield settings, await connect(settings, start_embedded=False)
        finally:
            server.stop()


async def cmd_report(args: argparse.Namespace) -> int:
    """Restore into a private home, start a server (no workers), read the audits, stop."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    async with _restored(Path(args.home)) as (settings, client):
        manifest = load_manifest(settings)
        rows = await report_rows(client, settings, manifest)
    text = report_markdown(rows, manifest, "llm_eval report")
    write_atomic(out / "report.md", text.encode("utf-8"))
    data = {"generated_at": now(), "manifest": manifest.model_dump(mode="json"), "rows": rows}
    write_atomic(out / "report.json", json.dumps(data, indent=1, default=str).encode("utf-8"))
    print(text, end="")
    return 0


async def cmd_timeline(args: argparse.Namespace) -> int:
    """Every finished activity's start and end, from a restored home's histories."""
    from scripts.llm_eval.timeline import steps, timeline_markdown

    async with _restored(Path(args.home)) as (_, client):
        found = await steps(client)
    text = timeline_markdown(found, f"Activity timeline of {Path(args.home).name}")
    if args.out is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(args.out), text.encode("utf-8"))
    print(text, end="")
    return 0


async def cmd_compare(args: argparse.Namespace) -> int:
    """Two or more runs' report.json files side by side (no server: the reports suffice)."""
    from scripts.llm_eval.compare import compare_markdown, load_rows

    runs = []
    for given in args.run:
        label, sep, path = given.partition("=")
        if not sep or not label or not path:
            raise SystemExit(f"--run {given!r}: expected LABEL=REPORT.json")
        runs.append((label, load_rows(Path(path))))
    text = compare_markdown(runs)
    if args.out is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(args.out), text.encode("utf-8"))
    print(text, end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm_eval", description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def running(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", type=Path, default=None, help="where results go (default $OUT)")
        p.add_argument(
            "--budget-s",
            type=float,
            default=450.0,
            help="seconds from this process's start until the campaigns are stopped and "
            "packed (default 450: stopping and packing take 20-100 s more, and a device call "
            "ends at 600 s)",
        )
        p.add_argument(
            "--snapshot-s",
            type=float,
            default=150.0,
            help="write a live home.tgz snapshot this often (0: only at the end)",
        )
        p.add_argument(
            "--extra-worker",
            action="append",
            default=[],
            metavar="CMD",
            help="another worker command run beside the local ones ({gpu_queue}, {cpu_queue} "
            "are filled in), e.g. a GPU stand-in on a CPU machine",
        )

    start = sub.add_parser("start", help="submit one folder-mode campaign per problem and run")
    start.add_argument("--problems", type=Path, nargs="+", required=True)
    start.add_argument("--rounds", type=int, default=2, help="search iterations T (default 2)")
    start.add_argument("--plans", type=int, default=2, help="plans per round N (default 2)")
    start.add_argument("--retries", type=int, default=1, help="retry-fix attempts K (default 1)")
    start.add_argument("--beam", type=int, default=1, help="beam width B (default 1)")
    start.add_argument("--max-targets", type=int, default=1, help="targets searched (default 1)")
    start.add_argument("--mode", default="auto", help="auto, single or multi (default auto)")
    start.add_argument("--gamma", type=float, default=1.03)
    start.add_argument("--max-gpu-seconds", type=float, default=None)
    start.add_argument(
        "--llm-model", default="reply-folder", help="label of whoever writes the replies"
    )
    start.add_argument(
        "--proposer",
        choices=["llm", "builtin"],
        default="llm",
        help="llm: requests answered out of band (default); builtin: no requests, the same "
        "chain of calls carries a built-in campaign across machine loans",
    )
    running(start)

    resume = sub.add_parser("resume", help="restore home.tgz, deliver replies, run, pack")
    resume.add_argument("--home", type=Path, required=True, help="the previous call's home.tgz")
    resume.add_argument(
        "--replies", type=Path, default=None, help="a folder (or .tgz) of ID.txt reply files"
    )
    resume.add_argument(
        "--force", action="store_true", help="replace state already in KERNELOPT_HOME"
    )
    running(resume)

    report = sub.add_parser("report", help="the outcome table of a home.tgz")
    report.add_argument("--home", type=Path, required=True)
    report.add_argument("--out", type=Path, required=True)

    timeline = sub.add_parser("timeline", help="when each activity of a home.tgz ran")
    timeline.add_argument("--home", type=Path, required=True)
    timeline.add_argument("--out", type=Path, default=None, help="a markdown file to write")

    compare = sub.add_parser("compare", help="runs' report.json files side by side")
    compare.add_argument(
        "--run", action="append", required=True, metavar="LABEL=REPORT.json", help="one per run"
    )
    compare.add_argument("--out", type=Path, default=None, help="a markdown file to write")
    return parser


COMMANDS = {
    "start": cmd_start,
    "resume": cmd_resume,
    "report": cmd_report,
    "timeline": cmd_timeline,
    "compare": cmd_compare,
}


def main(argv: list[str] | None = None) -> int:
    from kernelopt.log import configure

    args = build_parser().parse_args(argv)
    configure(level=os.environ.get("KERNELOPT_LOG_LEVEL", "warning"))
    try:
        code = asyncio.run(COMMANDS[args.command](args))
    except KernelOptError as exc:
        print(f"llm_eval {args.command}: {exc}", file=sys.stderr, flush=True)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip finalisation: the Temporal client's core threads can abort it
