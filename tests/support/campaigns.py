"""The campaign the end-to-end and deployment tests run over the GPU doubles, and what they compare."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.config import Settings
from kernelopt.contracts import (
    CampaignOptions,
    Outcome,
    ProposerConfig,
    ProposerKind,
    SearchParams,
)
from kernelopt.contracts.screening import ScreenParams
from kernelopt.store import open_store
from tests.support.processes import WorkerProcess, start_workers
from tests.support.temporal import search_ids


def small_options(cpu_queue: str, gpu_queue: str) -> CampaignOptions:
    """Built-in proposer, few candidates, every target searched: ends in seconds."""
    return CampaignOptions(
        search=SearchParams(iterations=2, plans=2, retries=1, beam=2),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        cpu_queue=cpu_queue,
        gpu_queue=gpu_queue,
        search_library_dominated=True,
    )


def smallest_gpu_options(
    cpu_queue: str, gpu_queue: str, heartbeat_s: float | None = None
) -> CampaignOptions:
    """The smallest campaign that still runs every step on a real GPU: the top target
    only (whole forward or one kernel), one round of two candidates, screened, the best
    one gated (``cap=1``), no retry round."""
    return CampaignOptions(
        search=SearchParams(iterations=1, plans=2, beam=1, retries=0, screen=ScreenParams(cap=1)),
        proposer=ProposerConfig(kind=ProposerKind.BUILTIN),
        gpu_queue=gpu_queue,
        cpu_queue=cpu_queue,
        max_targets=1,
        gpu_heartbeat_s=heartbeat_s,
    )


def queues() -> tuple[str, str]:
    """A CPU and a GPU task queue of this test's own."""
    tag = uuid.uuid4().hex[:8]
    return f"cpu-{tag}", f"gpu-{tag}"


@dataclass
class Workers:
    """A CPU and a GPU worker process (the GPU one serving the doubles) on queues of their own."""

    cpu: WorkerProcess
    gpu: WorkerProcess
    queues: tuple[str, str]

    def options(self, **update: Any) -> CampaignOptions:
        """``small_options`` on these workers' queues, with ``update``'s fields replaced."""
        return small_options(*self.queues).model_copy(update=update)


@contextmanager
def running_workers(settings: Settings, **env: str) -> Iterator[Workers]:
    """Both workers started (``env``: extra environment, e.g. the doubles' delay), and stopped
    on the way out -- also a worker a test put in place of one it killed."""
    cpu_q, gpu_q = queues()
    cpu, gpu = start_workers(settings, cpu_q, gpu_q, **env)
    workers = Workers(cpu, gpu, (cpu_q, gpu_q))
    try:
        yield workers
    finally:
        workers.cpu.stop()
        workers.gpu.stop()


async def start_small_campaign(
    client: Client, settings: Settings, problem: Path, workers: Workers, **update: Any
) -> WorkflowHandle:
    """A campaign of ``problem`` on ``workers``, with their ``options(**update)``."""
    prepared = prepare_problem(problem, open_store(settings.artifacts_dir))
    return await start_campaign(client, prepared, workers.options(**update))


def comparable(outcome: Outcome) -> tuple:
    """What two runs of one campaign must agree on."""
    return (
        outcome.category,
        round(outcome.speedup, 6),
        tuple(outcome.replaced),
        outcome.candidates_tried,
        outcome.candidates_accepted,
    )


async def gate_calls_per_candidate(client: Client, workflow_id: str) -> Counter:
    """How often each candidate was sent to gate_candidate, across the campaign's searches."""
    counts: Counter = Counter()
    for child in await search_ids(client, workflow_id):
        async for event in client.get_workflow_handle(child).fetch_history_events():
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "gate_candidate":
                (payload,) = attrs.input.payloads
                data = pydantic_data_converter.payload_converter.from_payload(payload)
                counts[data["candidate_id"]] += 1
    return counts
