"""End to end on the GPU host: `kernelopt optimize` machinery on several problems at once.

    source scripts/device_env.sh; python3 scripts/gpu_e2e.py [--deadline S] PROBLEM...

Starts the embedded Temporal server and the local workers exactly as
`kernelopt optimize` does (one CPU worker, one GPU worker per GPU), submits one
campaign per problem with the built-in proposer and a small search, waits for
the outcomes (or the deadline), and prints a table.  Outcomes, reports and the
workers' logs go to $OUT.  Used to produce the numbers quoted in issue notes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelopt.campaigns import default_gpu_queue, prepare_problem, start_campaign  # noqa: E402
from kernelopt.client import connect  # noqa: E402
from kernelopt.config import Settings  # noqa: E402
from kernelopt.contracts import (  # noqa: E402
    CampaignOptions,
    CampaignProgress,
    ProposerConfig,
    ProposerKind,
    SearchParams,
)
from kernelopt.local_workers import ensure_local_workers, stop_local_workers  # noqa: E402
from kernelopt.store import open_store  # noqa: E402


async def dump_histories(client, workflow_ids: list[str], out: Path) -> None:
    """Each activity's duration (scheduled -> closed) per campaign, for the cost breakdown."""
    from temporalio.api.enums.v1 import EventType

    lines = []
    for wf_id in workflow_ids:
        history = await client.get_workflow_handle(wf_id).fetch_history()
        ids = [wf_id] + [
            e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
        ]
        for one in ids:
            h = await client.get_workflow_handle(one).fetch_history()
            (out / f"history-{one.replace('/', '_')}.json").write_text(h.to_json())
            scheduled = {}
            for e in h.events:
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    name = e.activity_task_scheduled_event_attributes.activity_type.name
                    scheduled[e.event_id] = (name, e.event_time.ToDatetime())
                elif e.event_type in (
                    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                ):
                    attrs = (
                        e.activity_task_completed_event_attributes
                        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                        else e.activity_task_failed_event_attributes
                    )
                    name, at = scheduled.get(attrs.scheduled_event_id, ("?", None))
                    if at is not None:
                        secs = (e.event_time.ToDatetime() - at).total_seconds()
                        lines.append(f"{one:60} {name:16} {secs:7.1f} s")
    (out / "activity_durations.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-40:]), flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--deadline", type=float, default=400.0)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--plans", type=int, default=3)
    parser.add_argument("--max-targets", type=int, default=2)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/gpu-e2e-out"))
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env()
    started = time.monotonic()
    client = await connect(settings)
    workers = ensure_local_workers(settings)
    print(f"server up, workers {workers}", flush=True)
    store = open_store(settings.artifacts_dir)
    options = CampaignOptions(
        search=SearchParams(iterations=args.iterations, plans=args.plans, beam=2, retries=1),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        gpu_queue=default_gpu_queue(settings),
        cpu_queue=settings.cpu_queue,
        max_targets=args.max_targets,
    )
    handles = []
    for path in args.problems:
        problem = prepare_problem(path, store, level=None)
        handles.append(await start_campaign(client, problem, options))
    results: dict[str, object] = {}

    async def wait(handle) -> None:
        try:
            results[handle.id] = await handle.result()
        except Exception as exc:  # record, keep the others
            results[handle.id] = exc

    waiters = [asyncio.create_task(wait(h)) for h in handles]
    remaining = args.deadline - (time.monotonic() - started)
    await asyncio.wait(waiters, timeout=max(5.0, remaining))
    rows = []
    for handle in handles:
        outcome = results.get(handle.id)
        if outcome is None:
            progress = await handle.query("progress", result_type=CampaignProgress)
            rows.append((handle.id, "unfinished", progress.phase.value, "", "", progress.message))
            continue
        if isinstance(outcome, Exception):
            rows.append((handle.id, "error", "", "", "", str(outcome)[:120]))
            continue
        (out / f"{handle.id}.outcome.json").write_text(outcome.model_dump_json(indent=2))
        if outcome.report is not None:
            (out / f"{handle.id}.report.md").write_text(store.get_text(outcome.report))
        rows.append(
            (
                handle.id,
                outcome.category.value,
                f"{outcome.speedup:.3f}x",
                f"{outcome.baseline_ms or 0:.4f}",
                f"{outcome.optimized_ms or 0:.4f}",
                f"{outcome.candidates_tried} tried/{outcome.candidates_accepted} acc; "
                f"f={outcome.triage.library_fraction if outcome.triage else float('nan'):.3f}; "
                f"{outcome.used.gpu_seconds:.0f} GPU-s; {outcome.reason[:70]}",
            )
        )
    await dump_histories(client, [h.id for h in handles], out)
    for name in ("cpu", "gpu0"):
        log = settings.home / "workers" / f"{name}.log"
        if log.is_file():
            shutil.copy(log, out / f"worker-{name}.log")
    (out / "table.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{'campaign':44} {'outcome':12} {'speedup':8} {'base ms':8} {'opt ms':8} notes")
    for row in rows:
        print(f"{row[0]:44} {row[1]:12} {row[2]:8} {row[3]:8} {row[4]:8} {row[5]}")
    print(f"wall {time.monotonic() - started:.0f} s", flush=True)
    stop_local_workers(settings, wait_s=5)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
