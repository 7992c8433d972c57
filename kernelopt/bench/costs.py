"""Where a campaign's GPU time went: each activity's duration, read from workflow histories.

The budget charges what GPU activities report (``device_seconds``); this table
puts that next to the wall time Temporal saw for every activity, with the stage
split (compile, triage, gates) the activities record, so a slow suite run can
be explained from its histories alone.

    python -m kernelopt.bench.costs RESULTS_DIR OUT_DIR [--histories]

Run it against the server that ran ``kernelopt bench`` (same ``KERNELOPT_HOME``
and ports); campaigns that finished under an earlier server are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from kernelopt.client import connect
from kernelopt.config import Settings

from .results import load_results

TABLE_NAME = "activity_durations.txt"


def _candidate_of(event: Any) -> str:
    """The candidate id in a gate_candidate activity's input payload ('' if none)."""
    attrs = event.activity_task_scheduled_event_attributes
    for payload in attrs.input.payloads:
        with contextlib.suppress(ValueError, AttributeError):
            return str(json.loads(payload.data).get("candidate_id", ""))
    return ""


def _device_seconds(attrs: Any) -> tuple[float, str]:
    """The run time a completed GPU activity reported (``device_seconds``, else 0), and
    where its time went (its ``stage_seconds``; '' if none)."""
    for payload in attrs.result.payloads:
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            result = json.loads(payload.data)
            value = result.get("device_seconds")
            stages = result.get("stage_seconds") or {}
            split = ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
            return (float(value) if value is not None else 0.0), split
    return 0.0, ""


async def dump_histories(
    client: Client, workflow_ids: list[str], out: Path
) -> tuple[dict[str, int], dict[str, float]]:
    """Write every campaign's (and child search's) history and one activity table to ``out``.

    Returns how many times each candidate's gate_candidate activity completed (a
    candidate gated to completion twice is counted twice: the fault tests look
    for that), and per campaign the run time its GPU activities reported, which
    is what its GPU-second budget must show.
    """
    lines: list[str] = []
    completions: dict[str, int] = {}
    held: dict[str, float] = {}
    for wf_id in workflow_ids:
        history = await client.get_workflow_handle(wf_id).fetch_history()
        ids = [wf_id] + [
            e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
        ]
        for one in ids:
            candidate_by_event: dict[int, str] = {}  # event ids restart in every history
            h = await client.get_workflow_handle(one).fetch_history()
            (out / f"history-{one.replace('/', '_')}.json").write_text(h.to_json())
            scheduled: dict[int, tuple[str, Any]] = {}
            for e in h.events:
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    name = e.activity_task_scheduled_event_attributes.activity_type.name
                    scheduled[e.event_id] = (name, e.event_time.ToDatetime())
                    if name == "gate_candidate":
                        candidate_by_event[e.event_id] = f"{one}/{_candidate_of(e)}"
                elif e.event_type in (
                    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                ):
                    completed = e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                    attrs = (
                        e.activity_task_completed_event_attributes
                        if completed
                        else e.activity_task_failed_event_attributes
                    )
                    name, at = scheduled.get(attrs.scheduled_event_id, ("?", None))
                    key = candidate_by_event.get(attrs.scheduled_event_id)
                    ran, split = 0.0, ""
                    if completed:
                        if key:
                            completions[key] = completions.get(key, 0) + 1
                        ran, split = _device_seconds(attrs)
                        held[wf_id] = held.get(wf_id, 0.0) + ran
                    if at is not None:
                        secs = (e.event_time.ToDatetime() - at).total_seconds()
                        split = f": {split}" if split else ""
                        lines.append(f"{one:60} {name:16} {secs:7.1f} s  (ran {ran:6.1f} s{split})")
    (out / TABLE_NAME).write_text("\n".join(lines) + "\n")
    return completions, held


async def export_costs(client: Client, results: Path, out: Path, histories: bool = False) -> int:
    """Write the activity table of every finished problem this server still knows."""
    ids = [r.outcome.campaign_id for r in load_results(results)]
    scratch = out / "histories"
    scratch.mkdir(parents=True, exist_ok=True)
    found = []
    for campaign_id in ids:
        try:
            await client.get_workflow_handle(campaign_id).describe()
        except RPCError:  # finished under an earlier server: its history is gone
            continue
        found.append(campaign_id)
    await dump_histories(client, found, scratch)
    shutil.move(scratch / TABLE_NAME, out / TABLE_NAME)
    if not histories:
        shutil.rmtree(scratch)
    return len(found)


async def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--histories", action="store_true", help="keep the history JSON files")
    args = parser.parse_args(argv)
    client = await connect(Settings.from_env(), start_embedded=False)
    found = await export_costs(client, args.results, args.out, args.histories)
    sys.stdout.write(f"{found} campaign(s) on this server: {args.out / TABLE_NAME}\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
