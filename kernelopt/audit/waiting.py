"""What a running campaign is waiting for, right now, from the server's pending-activity view.

Poller lists notice a dead worker only after a poll times out (a minute or
more); the pending activities of the campaign and its running searches say
it at once: which activity, which attempt, since when it has been waiting
for a worker, and why the last attempt ended (e.g. a heartbeat timeout after
a GPU worker died).  ``kernelopt show`` / ``follow`` can print this.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus

from .history import describe_failure


@dataclass(frozen=True)
class PendingWork:
    workflow_id: str
    activity: str
    activity_id: str
    state: str  # scheduled (no worker has it) / started / cancel_requested
    attempt: int
    last_failure: str = ""
    last_worker: str = ""
    waiting_since: datetime | None = None

    @property
    def waiting_for_worker(self) -> bool:
        return self.state == "scheduled"

    def describe(self) -> str:
        text = f"{self.activity} (attempt {self.attempt}) in {self.workflow_id}: {self.state}"
        if self.waiting_since is not None:
            text += f" since {self.waiting_since:%H:%M:%S}"
        if self.last_failure:
            text += f"; last attempt: {self.last_failure}"
            if self.last_worker:
                text += f" on {self.last_worker}"
        return text


def _state(value: int) -> str:
    return PendingActivityState.Name(value).removeprefix("PENDING_ACTIVITY_STATE_").lower()


async def pending_work(client: Client, workflow_id: str, depth: int = 2) -> list[PendingWork]:
    """Pending activities of a running workflow and (recursively) its running children."""
    desc = await client.get_workflow_handle(workflow_id).describe()
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return []
    raw = desc.raw_description
    out = []
    for p in raw.pending_activities:
        since = None
        if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
            # a retry waits since its previous attempt ended; a first attempt since scheduling
            stamp = p.last_attempt_complete_time if p.attempt > 1 else p.scheduled_time
            if stamp.seconds:
                since = stamp.ToDatetime(tzinfo=UTC)
        out.append(
            PendingWork(
                workflow_id=workflow_id,
                activity=p.activity_type.name,
                activity_id=p.activity_id,
                state=_state(p.state),
                attempt=p.attempt,
                last_failure=describe_failure(p.last_failure) if p.HasField("last_failure") else "",
                last_worker=p.last_worker_identity,
                waiting_since=since,
            )
        )
    if depth > 0:
        for child in raw.pending_children:
            out += await pending_work(client, child.workflow_id, depth - 1)
    return out


__all__ = ["PendingWork", "pending_work"]
