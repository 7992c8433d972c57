"""The ``kernelopt audit ID [--json] [--html FILE]`` command (the report itself: ``kernelopt.audit``)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from temporalio.client import Client

from kernelopt.audit.load import load_report


async def waiting_now(client: Client, campaign_id: str, gpu_queue: str) -> list[str]:
    """What the running campaign waits for (a GPU worker nobody runs, a stalled retry)."""
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    from kernelopt.contracts import CampaignProgress
    from kernelopt.follow import waiting_text

    handle = client.get_workflow_handle(campaign_id)
    try:
        desc = await handle.describe()
        try:
            progress = await handle.query("progress", result_type=CampaignProgress)
        except (WorkflowQueryFailedError, RPCError):  # no workflow task has run yet
            progress = None
        hint = await waiting_text(client, handle, progress, gpu_queue, desc.task_queue)
    except RPCError:
        return []
    return hint.splitlines() if hint else []


async def audit_command(
    client: Client | None,
    campaign_id: str,
    as_json: bool,
    html: Path | None,
    console: Console | None = None,
    gpu_queue: str | None = None,
) -> int:
    """Print the audit; write the HTML report when asked.  0 when every consistency check holds."""
    console = console or Console()
    report = await load_report(client, campaign_id)
    if client is not None and report.status == "running" and gpu_queue:
        report.waiting = await waiting_now(client, campaign_id, gpu_queue)
    if html is not None:
        from kernelopt.audit.html import render_html

        html = Path(html)
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(report), encoding="utf-8")
    if as_json:
        # plain JSON (no markup, no wrapping) so it pipes into jq and friends
        console.file.write(report.model_dump_json(indent=2) + "\n")
    else:
        from kernelopt.audit.render import print_report

        print_report(report, console)
        if html is not None:
            console.print(f"HTML report: {html}")
    return 0 if report.ok else 1


__all__ = ["audit_command", "waiting_now"]
