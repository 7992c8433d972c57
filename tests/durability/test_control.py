"""Steering a running campaign: pause, resume, cancel, budgets, progress, search attributes.

Through ``kernelopt pause|resume|cancel|budget|show|list`` (the real CLI entry
point, pointed at the session's dev server by environment) and through the
client where the CLI has no way to express the case (an invalid budget the
update's validator must reject).  Real workers, GPU doubles.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)

from kernelopt.audit import load_report
from kernelopt.audit.runs import campaign_histories
from kernelopt.config import Settings
from kernelopt.contracts import (
    SEARCH_PROGRESS,
    Budgets,
    CampaignPhase,
    Outcome,
    OutcomeCategory,
    SearchProgress,
    names,
)
from kernelopt.store import open_store
from tests.durability.support import (
    module_workers,
    options,
    outcome_of,
    progress,
    submit,
    wait_for_phase,
    wait_until,
)
from tests.support.cli import cli_in_process

workers = module_workers("control-logs", "0.15")


async def _searching(client: Client, settings: Settings, workers, **opts) -> WorkflowHandle:
    """A campaign with ``options(**opts)`` on this module's workers, submitted and searching."""
    handle = await submit(client, settings, options(*workers, **opts))
    await wait_for_phase(handle, CampaignPhase.SEARCHING)
    return handle


async def _cli_ok(capsys, *args: str) -> str:
    """``kernelopt ARGS`` in this process, which must exit 0: its output."""
    code, out = await cli_in_process(capsys, *args)
    assert code == 0, out
    return out


async def test_pause_holds_the_campaign_between_steps_and_resume_continues(
    client: Client, temporal_settings: Settings, workers, cli_env, capsys
) -> None:
    handle = await _searching(client, temporal_settings, workers)
    assert "paused" in await _cli_ok(capsys, "pause", handle.id)
    # the step in flight (the search's iteration, or the search's end) finishes; then it holds
    await wait_until(
        lambda: _held(client, handle), 60, what="the campaign to hold at a step boundary"
    )
    held = await _work_done(client, handle)
    await asyncio.sleep(2.0)
    assert await _work_done(client, handle) == held, "work went on while paused"
    assert json.loads(await _cli_ok(capsys, "show", handle.id, "--json"))["paused"] is True

    assert "resumed" in await _cli_ok(capsys, "resume", handle.id)
    outcome = await asyncio.wait_for(outcome_of(client, handle.id), 120)
    assert outcome.category == OutcomeCategory.OPTIMIZED
    report = await load_report(client, handle.id, open_store(temporal_settings.artifacts_dir))
    signals = [e.name for e in report.controls if e.kind == "signal"]
    assert signals == ["pause", "resume"]
    assert await _started_while_paused(client, handle.id) == []


async def _search_handle(client: Client, handle, target: str | None):
    """The search of ``target`` if it is still running, else None."""
    if target is None:
        return None
    search = client.get_workflow_handle(f"{handle.id}/search/{target}")
    if (await search.describe()).status != WorkflowExecutionStatus.RUNNING:
        return None
    return search


async def _held(client: Client, handle) -> bool:
    """Paused and at a step boundary: the search waits between iterations, or none is running.

    ``progress.paused`` says the pause was received, not that the step in flight
    has ended; a search that ended must also be counted by the campaign.
    """
    p = await progress(handle)
    if not p.paused:
        return False
    search = await _search_handle(client, handle, p.current_target)
    if search is not None:
        step = (await search.query(SEARCH_PROGRESS, result_type=SearchProgress)).step
        return step == "paused"
    state = await handle.query("state")
    return p.current_target in {r["target_id"] for r in state["results"]} | {None}


async def _work_done(client: Client, handle) -> tuple:
    """What the campaign and its running search have done so far (the search counts its own)."""
    p = await progress(handle)
    search = await _search_handle(client, handle, p.current_target)
    s = await search.query(SEARCH_PROGRESS, result_type=SearchProgress) if search else None
    return (
        p.targets_done,
        p.candidates_tried,
        p.phase,
        (s.iteration, s.candidates_tried, s.step) if s else None,
    )


def _signalled(event, name: str) -> bool:
    return (
        event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and event.workflow_execution_signaled_event_attributes.signal_name == name
    )


def _while_paused(history) -> list | None:
    """The events a workflow recorded between the pause it received and the resume; None: no pause.

    Commands a workflow task sent after seeing the pause are recorded after it (a signal
    that arrives during a task is written after that task's commands).
    """
    events = list(history.events)
    start = next((i for i, e in enumerate(events) if _signalled(e, "pause")), None)
    if start is None:
        return None
    end = next((i for i, e in enumerate(events) if i > start and _signalled(e, "resume")), None)
    return events[start + 1 : end]


async def _started_while_paused(client: Client, campaign_id: str) -> list[str]:
    """Steps started after a workflow saw the pause, and searches that ran without being told.

    A campaign step is an activity or a search; a search's step is an iteration, which
    begins with its proposer.  What was in flight may end; nothing new may begin.
    """
    found: list[str] = []
    ran_through: set[str] = set()  # searches that ended while the campaign was paused
    unreachable: set[str] = set()  # a forwarded pause that found its search already ended
    histories = await campaign_histories(client, campaign_id)
    for run, history in histories:
        if run.workflow_type != names.OPTIMIZE_MODEL or history is None:
            continue
        for e in _while_paused(history) or []:
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = e.activity_task_scheduled_event_attributes.activity_type.name
                found.append(f"campaign: activity {name}")
            elif e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                child = e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                found.append(f"campaign: search {child}")
            elif e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
                attrs = e.child_workflow_execution_completed_event_attributes
                ran_through.add(attrs.workflow_execution.workflow_id)
            elif e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED:
                attrs = e.signal_external_workflow_execution_failed_event_attributes
                unreachable.add(attrs.workflow_execution.workflow_id)
    for run, history in histories:
        if run.workflow_type != names.SEARCH_KERNEL or history is None:
            continue
        window = _while_paused(history)
        if window is None:
            if run.workflow_id in ran_through - unreachable:
                found.append(f"{run.workflow_id}: ran through the pause without being told")
            continue
        for e in window:
            attrs = e.activity_task_scheduled_event_attributes
            if (
                e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and attrs.activity_type.name == names.PROPOSE_BUILTIN
            ):
                found.append(f"{run.workflow_id}: an iteration began")
                break
    return found


async def test_cancel_returns_the_compilers_baseline(
    client: Client, temporal_settings: Settings, workers, cli_env, capsys
) -> None:
    handle = await _searching(client, temporal_settings, workers)
    assert "baseline" in await _cli_ok(capsys, "cancel", handle.id)
    outcome: Outcome = await asyncio.wait_for(outcome_of(client, handle.id), 120)
    state = await handle.query("state")
    assert outcome.speedup == 1.0 and outcome.replaced == []
    assert outcome.reason == "cancelled by user"
    assert outcome.category == OutcomeCategory.FALLBACK
    # what is handed back is Inductor's own wrapper, untouched
    assert outcome.wrapper is not None
    assert outcome.wrapper.sha256 == state["compiled"]["wrapper"]["sha256"]
    assert outcome.report is not None  # a cancelled campaign still leaves its report
    report = await load_report(client, handle.id, open_store(temporal_settings.artifacts_dir))
    assert [e.name for e in report.controls] == ["stop"]
    assert all(c.final != "shipped" for c in report.candidates)
    assert not report.model_trials  # cancelled before any model-level gate


async def test_budget_updates_are_validated_and_take_effect(
    client: Client, temporal_settings: Settings, workers, cli_env, capsys
) -> None:
    handle = await _searching(client, temporal_settings, workers, budgets=Budgets(max_usd=5.0))

    # a negative budget is refused by the update's validator; nothing changes
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update("set_budgets", Budgets(max_usd=5.0, max_tokens=-1))
    assert (await progress(handle)).budgets == Budgets(max_usd=5.0)

    # through the CLI: other budgets are kept, the new one is set
    await _cli_ok(capsys, "budget", handle.id, "--max-gpu-seconds", "0")
    current = (await progress(handle)).budgets
    assert current == Budgets(max_usd=5.0, max_gpu_seconds=0.0)

    # zero GPU-seconds left: no further target is searched, the campaign still finishes
    outcome = await asyncio.wait_for(outcome_of(client, handle.id), 120)
    state = await handle.query("state")
    assert state["stop_reason"] == "budget gpu_seconds exhausted"
    assert len(state["results"]) < len((state["triage"] or {}).get("targets") or [1, 2])
    report = await load_report(client, handle.id, open_store(temporal_settings.artifacts_dir))
    updates = [e for e in report.controls if e.kind == "update"]
    assert len(updates) == 1, "the rejected update must not be in history"
    assert report.budgets == Budgets(max_usd=5.0, max_gpu_seconds=0.0)
    assert report.budgets_initial == Budgets(max_usd=5.0)
    assert outcome.used.gpu_seconds > 0.0


async def test_progress_query_and_search_attributes(
    client: Client, temporal_settings: Settings, workers, cli_env, capsys
) -> None:
    handle = await _searching(client, temporal_settings, workers)
    p = await progress(handle)
    assert p.campaign_id == handle.id and p.problem == "001_relu_chain"
    assert p.proposer == "builtin" and p.targets_total >= 1
    outcome = await asyncio.wait_for(outcome_of(client, handle.id), 120)
    assert outcome.category == OutcomeCategory.OPTIMIZED

    async def listed(query: str) -> list[str]:
        return [wf.id async for wf in client.list_workflows(query)]

    queries = [
        "KernelOptOutcome = 'optimized'",
        f"KernelOptCampaign = '{handle.id}'",
        "KernelOptProblem = '001_relu_chain' AND KernelOptPhase = 'done'",
        "KernelOptBestSpeedup > 1.0",
    ]
    for query in queries:
        await wait_until(
            lambda q=query: _contains(listed(q), handle.id), 20, what=f"visibility of {query}"
        )
    assert handle.id in await _cli_ok(capsys, "list", "--limit", "500")


async def _contains(ids, wanted: str) -> bool:
    return wanted in await ids
