"""When each activity of a home's campaigns ran: the evidence for a GPU-slots comparison.

A campaign report gives totals; whether two slots overlap work (or only stretch each step)
shows in the steps' own start and end times, which the workflow histories keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client

from kernelopt.audit.history import parse_run
from kernelopt.contracts.names import GPU_ACTIVITIES


@dataclass(frozen=True)
class Step:
    """One finished (completed or failed) activity attempt."""

    start: float  # epoch seconds the attempt started (scheduled, if never started)
    end: float
    activity: str
    workflow_id: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


async def steps(client: Client) -> list[Step]:
    """Every finished activity of every workflow in the client's namespace, by start."""
    found: list[Step] = []
    async for wf in client.list_workflows():
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        for call in parse_run(history, wf.run_id).activities:
            if call.closed_at is None or call.outcome not in ("completed", "failed"):
                continue
            start = call.started_at or call.scheduled_at
            found.append(
                Step(start.timestamp(), call.closed_at.timestamp(), call.activity_type, wf.id)
            )
    return sorted(found, key=lambda s: (s.start, s.activity))


def busy_union(spans: list[tuple[float, float]]) -> float:
    """Seconds during which at least one span was running."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def timeline_markdown(found: list[Step], title: str) -> str:
    """The steps as a table (seconds from the first start) and the GPU queue's overlap."""
    if not found:
        return f"# {title}\n\nNo finished activity.\n"
    t0 = min(s.start for s in found)
    lines = [
        f"# {title}",
        "",
        "| start s | end s | seconds | activity | workflow |",
        "|---:|---:|---:|---|---|",
    ]
    lines += [
        f"| {s.start - t0:.1f} | {s.end - t0:.1f} | {s.seconds:.1f} | {s.activity} | "
        f"{s.workflow_id} |"
        for s in found
    ]
    gpu = [s for s in found if s.activity in GPU_ACTIVITIES]
    if gpu:
        held = sum(s.seconds for s in gpu)
        union = busy_union([(s.start, s.end) for s in gpu])
        lines += [
            "",
            f"GPU-queue activities: {len(gpu)}, {held:.1f} s held in all, "
            f"{union:.1f} s with at least one running (mean overlap {held / union:.2f}).",
        ]
    return "\n".join(lines) + "\n"
