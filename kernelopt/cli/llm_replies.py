"""``kernelopt pending`` and ``kernelopt reply ID FILE``: answering reply-folder requests by hand.

``pending`` lists the requests still waiting in ``$KERNELOPT_HOME/llm/requests``
(readable at 80 columns: one block per request, no cut ids).  ``reply``
writes the reply file atomically and then signals the waiting search, so it
looks at once instead of at its next poll; without a reachable server the
file alone is enough.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from kernelopt.agents import reply_folder
from kernelopt.agents.deferred import LLM_REPLY_SIGNAL, MODES
from kernelopt.config import Settings
from kernelopt.durations import human_duration
from kernelopt.errors import KernelOptError
from kernelopt.log import get_logger

log = get_logger(__name__)
console = Console()


def proposer_fields(settings: Settings) -> dict[str, Any]:
    """The LLM settings a campaign's ProposerConfig takes from the environment."""
    if settings.llm_mode not in MODES:
        raise KernelOptError(
            f"KERNELOPT_LLM_MODE={settings.llm_mode!r}: expected one of {', '.join(MODES)}"
        )
    return {
        "max_output_tokens": settings.llm_max_output_tokens,
        "mode": settings.llm_mode,
        "poll_s": settings.llm_poll_s,
        "wait_limit_s": settings.llm_wait_limit_s,
    }


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("pending", help="LLM requests waiting for a reply (reply-folder mode)")
    rep = sub.add_parser("reply", help="deliver the reply to a waiting LLM request")
    rep.add_argument("id", help="request id (`kernelopt pending` lists them)")
    rep.add_argument("file", type=Path, help="the reply text ('-' reads stdin)")


def render_pending(items: list[dict[str, Any]], folder: Path, out: Console) -> None:
    """One block per request: the id on a line of its own, then what asked and when."""
    if not items:
        out.print("No LLM requests waiting in", highlight=False)
        out.print(f"  {folder}", highlight=False)
        return
    out.print(f"{len(items)} LLM request(s) waiting in", highlight=False)
    out.print(f"  {folder}", highlight=False)
    for item in items:
        out.print(f"\n[bold]{item.get('request_id', '?')}[/]", highlight=False)
        out.print(
            f"  {item.get('role', '?')} for campaign {item.get('campaign_id') or '-'}, "
            f"target {item.get('target_id') or '-'}, round {item.get('round', '?')}; "
            f"waiting {human_duration(float(item.get('age_s', 0)))}",
            highlight=False,
        )
    out.print("\nAnswer with: kernelopt reply ID FILE", highlight=False)


async def cmd_pending(args: argparse.Namespace, settings: Settings) -> int:
    f = reply_folder.folders(settings.llm_dir)
    render_pending(reply_folder.pending(f), f.requests, console)
    return 0


async def cmd_reply(args: argparse.Namespace, settings: Settings) -> int:
    import sys

    f = reply_folder.folders(settings.llm_dir)
    request = f.request_file(args.id)
    if not request.is_file():
        raise KernelOptError(f"no waiting request {args.id} in {f.requests} (`kernelopt pending`)")
    text = sys.stdin.read() if str(args.file) == "-" else _read(args.file)
    if not text.strip():
        raise KernelOptError(f"the reply {args.file} is empty")
    path = reply_folder.deliver(f, args.id, text)
    workflow_id = json.loads(request.read_text()).get("workflow_id", "")
    woke = await _wake(settings, workflow_id, args.id) if workflow_id else False
    note = "the search was told" if woke else "the search finds it at its next poll"
    console.print(f"{args.id}: reply written to {path}; {note}", highlight=False, soft_wrap=True)
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise KernelOptError(f"cannot read {path}: {exc.strerror}") from exc


async def _wake(settings: Settings, workflow_id: str, rid: str) -> bool:
    """Signal the waiting search; False when the server or the search is not reachable."""
    from temporalio.service import RPCError

    from kernelopt.client import connect_running

    try:
        client = await connect_running(settings)
        await client.get_workflow_handle(workflow_id).signal(LLM_REPLY_SIGNAL, rid)
    except (RPCError, KernelOptError, OSError, RuntimeError) as exc:
        log.info("llm.reply_not_signalled", workflow_id=workflow_id, error=str(exc))
        return False
    return True


ASYNC = {"pending": cmd_pending, "reply": cmd_reply}
