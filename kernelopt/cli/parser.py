"""The ``kernelopt`` argument parser and the campaign options it builds.

Kept apart from the commands so tests and the bench runner can build a request
from arguments without running anything.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kernelopt.cli import llm_replies
from kernelopt.config import Settings
from kernelopt.contracts import (
    Budgets,
    CampaignOptions,
    ProposerConfig,
    ProposerKind,
    SearchMode,
    SearchParams,
)
from kernelopt.errors import KernelOptError


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

    import worker as worker_module  # the CLI is the one place that imports worker.py

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

    from kernelopt.cli.prompt import add_parser as add_prompt_parser

    add_prompt_parser(sub)
    from kernelopt.cli.state import add_parser as add_state_parser

    add_state_parser(sub)
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
    llm_replies.add_parsers(sub)
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
        **llm_replies.proposer_fields(settings),
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
        budgets=budgets_from_args(args),
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


def budgets_from_args(args: argparse.Namespace) -> Budgets:
    return Budgets(
        max_tokens=args.max_tokens,
        max_usd=args.max_usd,
        max_gpu_seconds=args.max_gpu_seconds,
        max_wall_seconds=args.max_wall_seconds,
    )
