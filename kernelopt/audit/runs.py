"""Finding every run of a campaign on the server: its own runs and its children's.

A campaign is a chain of runs (continue-as-new) and each SearchKernel child is
a chain of its own.  The chain is walked forward from the first run through
each run's close event, so nothing depends on the visibility store (which
may lag or have expired).  The export workflow itself is left out: it is the
one reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHistory,
    WorkflowHistoryEventFilterType,
)

from kernelopt.contracts.audit import EXPORT_CAMPAIGN, CampaignRuns, WorkflowRun

from .history import close_status


async def _first_event(client: Client, workflow_id: str, run_id: str | None):
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=1):
        return event
    return None


async def _close_event(client: Client, workflow_id: str, run_id: str):
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    ):
        return event
    return None


async def first_run_id(client: Client, workflow_id: str) -> str:
    """The first run of a workflow id (its latest run's start event names it)."""
    event = await _first_event(client, workflow_id, None)
    if event is None:
        return ""
    return event.workflow_execution_started_event_attributes.first_execution_run_id


async def chain(
    client: Client,
    workflow_id: str,
    first: str | None = None,
    parent: str | None = None,
    full: bool = False,
) -> list[tuple[WorkflowRun, WorkflowHistory | None]]:
    """The runs of one workflow id in order; with ``full`` their whole histories too."""
    run_id = first or await first_run_id(client, workflow_id)
    out: list[tuple[WorkflowRun, WorkflowHistory | None]] = []
    seen: set[str] = set()
    while run_id and run_id not in seen:
        seen.add(run_id)
        history: WorkflowHistory | None = None
        if full:
            history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
            start, close = history.events[0], history.events[-1]
            events = len(history.events)
        else:
            start = await _first_event(client, workflow_id, run_id)
            close = await _close_event(client, workflow_id, run_id)
            events = close.event_id if close is not None else 0
        status, next_run = close_status(close)
        wtype = start.workflow_execution_started_event_attributes.workflow_type.name
        out.append(
            (
                WorkflowRun(
                    workflow_id=workflow_id,
                    run_id=run_id,
                    workflow_type=wtype,
                    status=status,
                    parent_workflow_id=parent,
                    events=events,
                ),
                history,
            )
        )
        run_id = next_run
    return out


def children_of(history: WorkflowHistory) -> list[tuple[str, str]]:
    """(workflow id, first run id) of every child a run started, export excluded."""
    found = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            continue
        a = event.child_workflow_execution_started_event_attributes
        if a.workflow_type.name == EXPORT_CAMPAIGN:
            continue
        found.append((a.workflow_execution.workflow_id, a.workflow_execution.run_id))
    return found


async def campaign_histories(
    client: Client, workflow_id: str, first: str | None = None, full_children: bool = True
) -> list[tuple[WorkflowRun, WorkflowHistory | None]]:
    """The campaign's runs (with histories), then each child's runs, in start order."""
    own = await chain(client, workflow_id, first, full=True)
    out = list(own)
    seen: set[str] = set()
    for _, history in own:
        for child_id, child_first in children_of(history):
            if child_id in seen:
                continue
            seen.add(child_id)
            out += await chain(
                client, child_id, child_first, parent=workflow_id, full=full_children
            )
    return out


async def list_runs(client: Client, workflow_id: str, first: str | None = None) -> CampaignRuns:
    runs = await campaign_histories(client, workflow_id, first, full_children=False)
    own = [r for r, _ in runs if r.workflow_id == workflow_id]
    status = own[-1].status if own else ""
    return CampaignRuns(
        campaign_id=workflow_id,
        runs=[r for r, _ in runs],
        closed=status not in ("", "running"),
        status=status,
    )


async def wait_closed(
    client: Client,
    workflow_id: str,
    poll_s: float = 2.0,
    heartbeat: Callable[[], None] | None = None,
) -> WorkflowExecutionStatus | None:
    """Until the latest run of ``workflow_id`` is no longer running (continue-as-new included)."""
    handle = client.get_workflow_handle(workflow_id)
    while True:
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return desc.status
        if heartbeat is not None:
            heartbeat()
        await asyncio.sleep(poll_s)


__all__ = ["campaign_histories", "chain", "children_of", "first_run_id", "list_runs", "wait_closed"]
