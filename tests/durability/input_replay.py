"""Replay that also compares the inputs each activity is scheduled with.

Temporal's replayer checks the *kind and order* of commands: a workflow change
that calls the same activities in the same order but with other inputs (other
seeds, another compile mode, candidates in another order) replays cleanly and
would silently change what a resumed 66-hour campaign does.  This replays a
history with an outbound interceptor that records every ``start_activity``
call, then compares each with the input recorded in the history's
``ActivityTaskScheduled`` event: same activity type, and the same value for
every field both sides have (fields added or dropped since the recording are
schema evolution, not non-determinism).
"""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    StartActivityInput,
    WorkflowOutboundInterceptor,
)

from tests.support.replay import outbound_interceptor, replayer

RECORDED: list[tuple[str, list[Any]]] = []  # (activity type, JSON of each argument)


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput):
        payloads = pydantic_data_converter.payload_converter.to_payloads(list(input.args))
        RECORDED.append((input.activity, [json.loads(p.data) for p in payloads]))
        return super().start_activity(input)


def scheduled_in(history: WorkflowHistory) -> list[tuple[str, list[Any]]]:
    """(activity type, JSON of each argument) of every activity the history scheduled."""
    out = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            out.append(
                (attrs.activity_type.name, [json.loads(p.data) for p in attrs.input.payloads])
            )
    return out


def differences(recorded: Any, replayed: Any, where: str = "") -> list[str]:
    """Where two JSON values disagree, over the dict keys both have."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        out = []
        for key in sorted(set(recorded) & set(replayed)):
            out += differences(recorded[key], replayed[key], f"{where}.{key}")
        return out
    if isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) != len(replayed):
            return [f"{where}: {len(recorded)} items recorded, {len(replayed)} on replay"]
        out = []
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=True)):
            out += differences(a, b, f"{where}[{i}]")
        return out
    if recorded != replayed:
        return [f"{where}: recorded {str(recorded)[:80]!r}, replay {str(replayed)[:80]!r}"]
    return []


async def input_mismatches(workflows: list[type], history: WorkflowHistory) -> list[str]:
    """Replay ``history`` on ``workflows``; every scheduled input that differs, in words."""
    RECORDED.clear()
    await replayer(workflows, [outbound_interceptor(_Outbound)]).replay_workflow(history)
    recorded = scheduled_in(history)
    replayed = list(RECORDED)
    problems = []
    if len(recorded) != len(replayed):
        problems.append(f"{len(recorded)} activities recorded, {len(replayed)} scheduled on replay")
    for i, ((kind, args), (again, new_args)) in enumerate(zip(recorded, replayed, strict=False)):
        if kind != again:
            problems.append(f"activity {i}: {kind} recorded, {again} on replay")
            continue
        problems += [f"activity {i} ({kind}) input{d}" for d in differences(args, new_args)]
    return problems
