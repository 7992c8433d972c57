"""End to end on the GPU host: `kernelopt optimize` machinery on several problems at once.

    source scripts/device_env.sh; python3 -m scripts.gpu_e2e [--deadline S] PROBLEM...

(``device_env.sh`` puts the repository root on ``PYTHONPATH``; elsewhere ``-m`` from
the root finds it.)  The regression check of the same machinery
is ``tests/e2e/test_gpu_campaigns.py``; this tool stays for long multi-call runs
(``--resume``) and for ``scripts/gpu_identity_corpus.py``, which calls it.

Starts the embedded Temporal server and the local workers exactly as
`kernelopt optimize` does (one CPU worker, one GPU worker per GPU), submits one
campaign per problem with the built-in proposer and a small search, waits for
the outcomes (or the deadline), and prints a table.  Outcomes, reports and the
workers' logs go to $OUT.  Used to produce the numbers quoted in issue notes.

A device call lasts at most ten minutes, a small campaign two to three on the one
GPU worker.  ``--resume`` continues in the next call on the same (warm) machine:
the submitted campaign ids live in ``$KERNELOPT_HOME/gpu-e2e-campaigns.json``;
a server or worker that died with the previous call is started again on the
same SQLite file (a server-restart fault test in itself), campaigns already
submitted are awaited instead of submitted again, the rest are submitted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from kernelopt.bench.costs import TABLE_NAME, dump_histories
from kernelopt.campaigns import default_gpu_queue, prepare_problem, start_campaign
from kernelopt.client import connect
from kernelopt.config import Settings
from kernelopt.contracts import (
    CampaignOptions,
    CampaignProgress,
    Outcome,
    ProposerConfig,
    ProposerKind,
    SearchParams,
)
from kernelopt.local_workers import ensure_local_workers, stop_local_workers
from kernelopt.store import open_store
from tests.e2e.faults import kill_gpu_worker


def _ms(value: float | None) -> str:
    """A time for the table; none (a fallback returns the baseline) is a dash, never 0."""
    return "-" if value is None else f"{value:.4f}"


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--deadline", type=float, default=400.0)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--plans", type=int, default=3)
    parser.add_argument("--max-targets", type=int, default=2)
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="submit the next campaign only when the previous one ended",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="await the campaigns an earlier call submitted (ids in $KERNELOPT_HOME), "
        "submit the rest",
    )
    parser.add_argument(
        "--keep-workers",
        action="store_true",
        help="leave server and workers running at the end (a --resume call follows)",
    )
    parser.add_argument(
        "--freeze",
        action="store_true",
        help="with --kill-gpu-worker-at: SIGSTOP the worker tree instead (a stuck worker)",
    )
    parser.add_argument(
        "--kill-gpu-worker-at",
        type=float,
        default=None,
        help="SIGKILL the GPU worker once a GPU activity runs after this many seconds, then "
        "start a new one (the fault test of issue 6 on real hardware)",
    )
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/gpu-e2e-out"))
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env()
    started = time.monotonic()
    client = await connect(settings)
    workers = ensure_local_workers(settings)
    print(f"server up, workers {workers}", flush=True)
    store = open_store(settings.artifacts_dir)
    state_file = settings.home / "gpu-e2e-campaigns.json"
    submitted: dict[str, str] = {}
    if args.resume and state_file.is_file():
        submitted = json.loads(state_file.read_text())
        print(f"resuming {len(submitted)} submitted campaign(s): {submitted}", flush=True)
    options = CampaignOptions(
        search=SearchParams(iterations=args.iterations, plans=args.plans, beam=2, retries=1),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        gpu_queue=default_gpu_queue(settings),
        cpu_queue=settings.cpu_queue,
        max_targets=args.max_targets,
        # a killed GPU worker's activity is retried this soon (production default: 120 s)
        gpu_heartbeat_s=15.0 if args.kill_gpu_worker_at is not None else None,
    )
    handles = []
    results: dict[str, object] = {}

    async def wait(handle) -> None:
        try:
            results[handle.id] = await handle.result()
        except Exception as exc:  # record, keep the others
            results[handle.id] = exc

    fault: dict[str, object] = {}
    killer = None  # held: an unreferenced task may be collected before it runs
    if args.kill_gpu_worker_at is not None:
        killer = asyncio.create_task(
            kill_gpu_worker(settings, started + args.kill_gpu_worker_at, fault, args.freeze)
        )
    waiters = []
    for path in args.problems:
        if str(path) in submitted:
            handle = client.get_workflow_handle(submitted[str(path)], result_type=Outcome)
        else:
            problem = prepare_problem(path, store, level=None)
            handle = await start_campaign(client, problem, options)
            submitted[str(path)] = handle.id
            state_file.write_text(json.dumps(submitted, indent=2))
        handles.append(handle)
        waiters.append(asyncio.create_task(wait(handle)))
        if args.sequential:  # one GPU worker: finish campaigns one by one, not all late
            left = args.deadline - (time.monotonic() - started)
            await asyncio.wait(waiters[-1:], timeout=max(5.0, left))
            if time.monotonic() - started > args.deadline:
                break
    remaining = args.deadline - (time.monotonic() - started)
    await asyncio.wait(waiters, timeout=max(5.0, remaining))
    if killer is not None and not killer.done():
        killer.cancel()
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
                _ms(outcome.baseline_ms),
                _ms(outcome.optimized_ms),
                f"{outcome.candidates_tried} tried/{outcome.candidates_accepted} acc; "
                f"f={outcome.triage.library_fraction if outcome.triage else float('nan'):.3f}; "
                f"{outcome.used.gpu_seconds:.0f} GPU-s; {outcome.reason[:70]}",
            )
        )
    gated, held = await dump_histories(client, [h.id for h in handles], out)
    print("\n".join((out / TABLE_NAME).read_text().splitlines()[-40:]), flush=True)
    for handle in handles:  # the budget must charge what the GPU activities reported
        outcome = results.get(handle.id)
        if isinstance(outcome, Outcome):
            print(
                f"{handle.id}: GPU-s charged {outcome.used.gpu_seconds:.1f}, "
                f"GPU activities reported {held.get(handle.id, 0.0):.1f}",
                flush=True,
            )
    for one in fault.get("frozen_pids", []):  # the stuck worker never comes back
        with contextlib.suppress(ProcessLookupError):
            os.kill(one, 9)
    # after any fault (this call's kill, or the previous call's end): nothing gated twice
    fault["gate_candidate_completions"] = sum(gated.values())
    fault["candidates_gated_twice"] = sorted(c for c, n in gated.items() if n > 1)
    (out / "fault.json").write_text(json.dumps(fault, indent=2, default=str))
    print(f"fault test: {json.dumps(fault, default=str)}", flush=True)
    for name in ("cpu", "gpu0"):
        log = settings.home / "workers" / f"{name}.log"
        if log.is_file():
            shutil.copy(log, out / f"worker-{name}.log")
    (out / "table.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{'campaign':44} {'outcome':12} {'speedup':8} {'base ms':8} {'opt ms':8} notes")
    for row in rows:
        print(f"{row[0]:44} {row[1]:12} {row[2]:8} {row[3]:8} {row[4]:8} {row[5]}")
    print(f"wall {time.monotonic() - started:.0f} s", flush=True)
    keep = args.keep_workers or os.environ.get("KERNELOPT_E2E_KEEP_WORKERS") == "1"
    if not keep:  # another script (or the next --resume call) shares them
        stop_local_workers(settings, wait_s=5)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
