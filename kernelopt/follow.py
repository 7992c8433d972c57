"""Live progress of a campaign in the terminal (rich), and the summary at the end.

Polls the workflow's ``progress`` query; when the campaign waits on a task
queue that no worker polls, says so and how to start one instead of looking
hung.  Ctrl-C detaches: the campaign keeps running on the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from kernelopt.campaign_status import progress_summary
from kernelopt.contracts import CampaignPhase, CampaignProgress, Outcome

GPU_PHASES = {
    CampaignPhase.COMPILING,
    CampaignPhase.TRIAGING,
    CampaignPhase.SEARCHING,
    CampaignPhase.RESTITCHING,
    CampaignPhase.VERIFYING,
}


async def has_pollers(client: Client, task_queue: str, activity: bool = True) -> bool:
    kind = (
        TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        if activity
        else TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    )
    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=kind,
            )
        )
    except RPCError:
        return True  # unknown: do not claim it is waiting
    now = time.time()
    for poller in resp.pollers:
        seen = poller.last_access_time.seconds if poller.HasField("last_access_time") else now
        if now - seen < 120:
            return True
    return False


def waiting_hint(queue: str, gpu_queue: str) -> str:
    if queue == gpu_queue:
        return (
            f"waiting for a GPU worker on task queue '{queue}': start one on a GPU host with "
            "`kernelopt worker --queue gpu` (same KERNELOPT_TEMPORAL_ADDRESS); "
            "the campaign continues when it joins"
        )
    return (
        f"waiting for a CPU worker on task queue '{queue}': start one with "
        "`kernelopt worker --queue cpu`"
    )


async def _stalled_retry(client: Client, workflow_id: str) -> str | None:
    """A retried activity that no worker has picked up yet, described; None otherwise."""
    from kernelopt.audit.waiting import pending_work

    try:
        pending = await pending_work(client, workflow_id)
    except RPCError:
        return None
    stalled = [p for p in pending if p.waiting_for_worker and p.attempt > 1]
    return stalled[0].describe() if stalled else None


async def waiting_text(
    client: Client,
    handle: WorkflowHandle,
    progress: CampaignProgress | None,
    gpu_queue: str,
    workflow_queue: str | None = None,
) -> str | None:
    """What the campaign waits for, if it waits on a worker nobody runs; None otherwise.

    ``follow``, ``show`` and the audit all say it, so a campaign waiting for a GPU
    worker never looks merely slow.
    """
    if progress is None:
        if workflow_queue and not await has_pollers(client, workflow_queue, activity=False):
            return waiting_hint(workflow_queue, gpu_queue)
        return None
    hint = None
    queue = progress.waiting_on
    if queue is None and progress.phase in GPU_PHASES:
        queue = gpu_queue  # a child search may be waiting on it
    if queue and not await has_pollers(client, queue):
        hint = waiting_hint(queue, gpu_queue)
    retry = await _stalled_retry(client, handle.id)
    if retry:  # a worker died mid-activity: say so before pollers notice
        hint = f"{hint}\n{retry}" if hint else retry
    return hint


def render(progress: CampaignProgress, hint: str | None, elapsed: float) -> Group:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    p = progress
    table.add_row("campaign", p.campaign_id)
    table.add_row("problem", p.problem)
    table.add_row("phase", p.phase.value + ("  (paused)" if p.paused else ""))
    table.add_row("proposer", p.proposer or "-")
    table.add_row("progress", progress_summary(p, elapsed))
    table.add_row(
        "candidates", f"{p.candidates_tried} tried, {p.candidates_accepted} passed gates 1-2"
    )
    table.add_row("best speedup", f"{p.best_speedup:.3f}x" if p.best_speedup else "-")
    budget = f"{p.used.tokens} tokens, ${p.used.usd:.3f}, {p.used.gpu_seconds:.0f} GPU-s"
    table.add_row("budget used", budget)
    table.add_row("elapsed", f"{elapsed:.0f} s")
    if p.message:
        table.add_row("note", p.message)
    parts: list = [table]
    if hint:
        parts.append(Text(hint, style="yellow"))
    return Group(*parts)


def status_line(progress: CampaignProgress | None, hint: str | None) -> str:
    """The progress as one plain line (logs, pipes, ``nohup``: no live display there)."""
    if progress is None:
        text = "starting"
    else:
        p = progress
        best = f"{p.best_speedup:.3f}x" if p.best_speedup else "-"
        text = (
            f"{p.phase.value}{' (paused)' if p.paused else ''}; "
            + progress_summary(p)
            + f"; best {best}"
        )
    return f"{text}; {hint}" if hint else text


class _PlainProgress:
    """Prints a line when the progress changes, and at least every ``every_s`` seconds."""

    def __init__(self, console: Console, started: float, every_s: float = 60.0) -> None:
        self.console, self.started, self.every_s = console, started, every_s
        self.last = ""
        self.last_at = 0.0

    def update(self, line: str) -> None:
        now = time.monotonic()
        if line == self.last and now - self.last_at < self.every_s:
            return
        self.console.print(f"[{now - self.started:6.0f} s] {line}", soft_wrap=True, markup=False)
        self.last, self.last_at = line, now


async def _age(handle: WorkflowHandle) -> float:
    """Seconds since the campaign started (0 when the server cannot say)."""
    from datetime import UTC, datetime

    try:
        desc = await handle.describe()
    except RPCError:
        return 0.0
    if desc.start_time is None:
        return 0.0
    return max(0.0, (datetime.now(UTC) - desc.start_time).total_seconds())


async def follow(
    client: Client,
    handle: WorkflowHandle,
    console: Console,
    gpu_queue: str,
    poll_s: float = 1.0,
) -> Outcome | None:
    """Show progress until the campaign ends; returns its outcome (None when detached)."""
    started = time.monotonic()
    age = await _age(handle)  # `show --follow` of an old campaign: its age, not ours
    result_task = asyncio.create_task(handle.result())
    progress: CampaignProgress | None = None
    plain = None if console.is_terminal else _PlainProgress(console, started)
    live_display = (
        Live(console=console, refresh_per_second=4, transient=False)
        if plain is None
        else contextlib.nullcontext()
    )
    try:
        with live_display as live:
            while not result_task.done():
                try:
                    progress = await handle.query("progress", result_type=CampaignProgress)
                except RPCError:
                    progress = None
                if progress is None:
                    desc = await handle.describe()
                    if desc.status != WorkflowExecutionStatus.RUNNING:
                        break
                    hint = await waiting_text(client, handle, None, gpu_queue, desc.task_queue)
                    if plain is not None:
                        plain.update(status_line(None, hint))
                    else:
                        live.update(Text(hint or "starting..."))
                else:
                    hint = await waiting_text(client, handle, progress, gpu_queue)
                    if plain is not None:
                        plain.update(status_line(progress, hint))
                    else:
                        elapsed = age + time.monotonic() - started
                        live.update(render(progress, hint, elapsed))
                await asyncio.wait({result_task}, timeout=poll_s)
        return await result_task
    except RPCError as exc:
        result_task.cancel()
        console.print(
            f"[yellow]lost contact with Temporal[/] ({exc.message}); campaign {handle.id} "
            f"is kept by the server: `kernelopt show {handle.id}` once it is reachable",
            soft_wrap=True,
        )
        return None
    except (KeyboardInterrupt, asyncio.CancelledError):
        result_task.cancel()
        console.print(
            f"[yellow]detached[/]: campaign {handle.id} keeps running; "
            f"`kernelopt show {handle.id}` to look again, `kernelopt cancel {handle.id}` to stop it"
        )
        return None
