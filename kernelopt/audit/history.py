"""Reading Temporal histories: one run's events as plain records.

Pure functions over ``WorkflowHistory`` (live from the server or loaded from
an exported JSON): payloads are decoded to JSON values with the project's
pydantic converter, activities are paired with their attempts and outcomes,
child workflows with their results, signals and updates with their
arguments.  Nothing here talks to the server.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter

_CLOSE_STATUS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed_out",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued_as_new",
}


def decode(payloads: Iterable[Payload]) -> list[Any]:
    """Payloads as JSON values (dicts, lists, numbers), never typed models."""
    out = []
    for payload in payloads:
        try:
            out.append(pydantic_data_converter.payload_converter.from_payload(payload))
        except Exception as exc:  # an undecodable payload must not hide the rest of the audit
            out.append({"undecodable": f"{type(exc).__name__}: {exc}"})
    return out


def first(payloads: Iterable[Payload]) -> Any:
    values = decode(payloads)
    return values[0] if values else None


def event_time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def describe_failure(failure: Failure) -> str:
    """One line: the message, the timeout kind, and the innermost cause."""
    parts = []
    current: Failure | None = failure
    while current is not None and current.ByteSize():
        text = current.message
        if current.HasField("timeout_failure_info"):
            kind = TimeoutType.Name(current.timeout_failure_info.timeout_type)
            text = f"{text} ({kind.removeprefix('TIMEOUT_TYPE_').lower()} timeout)"
        if current.HasField("application_failure_info") and current.application_failure_info.type:
            text = f"{current.application_failure_info.type}: {text}"
        if text:
            parts.append(text.strip().splitlines()[0][:300])
        current = current.cause if current.HasField("cause") else None
    return " <- ".join(parts)


@dataclass(kw_only=True)
class Call:
    """How a call the run made ended, read alike for activities and child workflows."""

    outcome: str
    result: Any = None
    failure: str = ""
    closed_at: datetime | None = None

    def close(self, outcome: str, at: datetime, attrs: Any) -> None:
        """Its closing event: when, and the result or (where the event carries one) the failure."""
        self.outcome = outcome
        self.closed_at = at
        if outcome == "completed":
            self.result = first(attrs.result.payloads)
        elif hasattr(attrs, "failure") and attrs.HasField("failure"):
            self.failure = describe_failure(attrs.failure)


@dataclass
class ActivityCall(Call):
    scheduled_event_id: int
    activity_type: str
    activity_id: str
    input: Any
    scheduled_at: datetime
    attempt: int = 0
    last_failure: str = ""
    started_at: datetime | None = None  # its last attempt's start (a history keeps only that)
    outcome: str = field(default="scheduled", kw_only=True)


@dataclass
class ChildCall(Call):
    initiated_event_id: int
    workflow_id: str
    workflow_type: str
    input: Any
    initiated_at: datetime
    run_id: str = ""
    outcome: str = field(default="initiated", kw_only=True)


@dataclass
class ReceivedMessage:
    """A signal or an update the run received."""

    kind: str
    name: str
    args: list[Any]
    at: datetime
    identity: str = ""
    result: Any = None
    update_id: str = ""


@dataclass
class ParsedRun:
    workflow_id: str
    run_id: str
    workflow_type: str
    input: Any
    started_at: datetime
    first_run_id: str = ""
    continued_from: str = ""
    parent_workflow_id: str | None = None
    status: str = "running"
    result: Any = None
    failure: str = ""
    new_run_id: str = ""  # continue-as-new successor
    new_run_input: Any = None
    closed_at: datetime | None = None
    last_event_at: datetime | None = None
    events: int = 0
    activities: list[ActivityCall] = field(default_factory=list)
    children: list[ChildCall] = field(default_factory=list)
    messages: list[ReceivedMessage] = field(default_factory=list)
    search_attributes: dict[str, Any] = field(default_factory=dict)  # latest upserted values

    def activities_named(self, name: str) -> Iterator[ActivityCall]:
        return (a for a in self.activities if a.activity_type == name)


def close_status(event: HistoryEvent | None) -> tuple[str, str]:
    """(status, next run id) of a run from its close event (None: still running)."""
    if event is None or event.event_type not in _CLOSE_STATUS:
        return "running", ""
    status = _CLOSE_STATUS[event.event_type]
    if status == "continued_as_new":
        attrs = event.workflow_execution_continued_as_new_event_attributes
        return status, attrs.new_execution_run_id
    return status, ""


def parse_run(history: WorkflowHistory, run_id: str = "") -> ParsedRun:
    """Every event of one run, paired up."""
    events = list(history.events)
    start = events[0].workflow_execution_started_event_attributes
    run = ParsedRun(
        workflow_id=history.workflow_id,
        run_id=run_id,
        workflow_type=start.workflow_type.name,
        input=first(start.input.payloads),
        started_at=event_time(events[0]),
        first_run_id=start.first_execution_run_id,
        continued_from=start.continued_execution_run_id,
        parent_workflow_id=start.parent_workflow_execution.workflow_id or None,
        last_event_at=event_time(events[-1]),
        events=len(events),
    )
    for key, payload in start.search_attributes.indexed_fields.items():
        run.search_attributes[key] = first([payload])
    if not run.run_id and not run.continued_from:
        run.run_id = run.first_run_id
    activities: dict[int, ActivityCall] = {}
    children: dict[int, ChildCall] = {}
    updates: dict[str, ReceivedMessage] = {}
    for event in events:
        _apply(run, event, activities, children, updates)
    run.activities = list(activities.values())
    run.children = list(children.values())
    return run


def _apply(
    run: ParsedRun,
    event: HistoryEvent,
    activities: dict[int, ActivityCall],
    children: dict[int, ChildCall],
    updates: dict[str, ReceivedMessage],
) -> None:
    t = event.event_type
    at = event_time(event)
    if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        a = event.activity_task_scheduled_event_attributes
        activities[event.event_id] = ActivityCall(
            scheduled_event_id=event.event_id,
            activity_type=a.activity_type.name,
            activity_id=a.activity_id,
            input=first(a.input.payloads),
            scheduled_at=at,
        )
    elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        a = event.activity_task_started_event_attributes
        call = activities.get(a.scheduled_event_id)
        if call is not None:
            call.attempt = a.attempt
            call.outcome = "started"
            call.started_at = at
            if a.HasField("last_failure"):
                call.last_failure = describe_failure(a.last_failure)
    elif t in _ACTIVITY_CLOSE:
        outcome, attr_name = _ACTIVITY_CLOSE[t]
        a = getattr(event, attr_name)
        call = activities.get(a.scheduled_event_id)
        if call is not None:
            call.close(outcome, at, a)
    elif t == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        a = event.start_child_workflow_execution_initiated_event_attributes
        children[event.event_id] = ChildCall(
            initiated_event_id=event.event_id,
            workflow_id=a.workflow_id,
            workflow_type=a.workflow_type.name,
            input=first(a.input.payloads),
            initiated_at=at,
        )
    elif t in _CHILD_EVENTS:
        outcome, attr_name = _CHILD_EVENTS[t]
        a = getattr(event, attr_name)
        call = children.get(a.initiated_event_id)
        if call is None:
            return
        if outcome == "started":
            call.outcome = outcome
            call.run_id = a.workflow_execution.run_id
            return
        call.close(outcome, at, a)  # a failed start's event names a cause, not a failure
        if outcome == "start_failed":
            call.failure = f"could not start: {a.cause}"
    elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        a = event.workflow_execution_signaled_event_attributes
        run.messages.append(
            ReceivedMessage("signal", a.signal_name, decode(a.input.payloads), at, a.identity)
        )
    elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        a = event.workflow_execution_update_accepted_event_attributes
        req = a.accepted_request
        msg = ReceivedMessage(
            "update",
            req.input.name,
            decode(req.input.args.payloads),
            at,
            req.meta.identity,
            update_id=req.meta.update_id,
        )
        updates[req.meta.update_id] = msg
        run.messages.append(msg)
    elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
        a = event.workflow_execution_update_completed_event_attributes
        msg = updates.get(a.meta.update_id)
        if msg is not None:
            if a.outcome.HasField("failure"):
                msg.result = {"failure": describe_failure(a.outcome.failure)}
            else:
                msg.result = first(a.outcome.success.payloads)
    elif t == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        for key, payload in fields.indexed_fields.items():
            run.search_attributes[key] = first([payload])
    elif t in _CLOSE_STATUS:
        run.status, run.new_run_id = close_status(event)
        run.closed_at = at
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            run.result = first(event.workflow_execution_completed_event_attributes.result.payloads)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            a = event.workflow_execution_continued_as_new_event_attributes
            run.new_run_input = first(a.input.payloads)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            run.failure = describe_failure(event.workflow_execution_failed_event_attributes.failure)


_ACTIVITY_CLOSE = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: (
        "completed",
        "activity_task_completed_event_attributes",
    ),
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: ("failed", "activity_task_failed_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: (
        "timed_out",
        "activity_task_timed_out_event_attributes",
    ),
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: (
        "cancelled",
        "activity_task_canceled_event_attributes",
    ),
}

_CHILD_EVENTS = {
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED: (
        "started",
        "child_workflow_execution_started_event_attributes",
    ),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: (
        "completed",
        "child_workflow_execution_completed_event_attributes",
    ),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: (
        "failed",
        "child_workflow_execution_failed_event_attributes",
    ),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: (
        "cancelled",
        "child_workflow_execution_canceled_event_attributes",
    ),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: (
        "timed_out",
        "child_workflow_execution_timed_out_event_attributes",
    ),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: (
        "terminated",
        "child_workflow_execution_terminated_event_attributes",
    ),
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED: (
        "start_failed",
        "start_child_workflow_execution_failed_event_attributes",
    ),
}


def iter_payloads(message: Message) -> Iterator[Payload]:
    """Every Payload anywhere inside a proto message (inputs, results, failure details)."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif descriptor.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if not isinstance(item, Message):
                continue
            if isinstance(item, Payload):
                yield item
            else:
                yield from iter_payloads(item)


__all__ = [
    "ActivityCall",
    "Call",
    "ChildCall",
    "ParsedRun",
    "ReceivedMessage",
    "close_status",
    "decode",
    "describe_failure",
    "event_time",
    "first",
    "iter_payloads",
    "parse_run",
]
