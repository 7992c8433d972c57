"""A GPU worker with several slots: untimed activities overlap, a timed one runs alone.

The real worker (``build_gpu_worker``) on the session's Temporal server, activities that
supervise real children under the GPU's lease as the product's do (``lease=``), and each
child's own record of when its job ran.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import worker
from activities.supervise import run_supervised
from tests.support.paths import ROOT
from tests.support.timed_probe import NapIn, SpanOut


async def _span(inp: NapIn, lease: str) -> SpanOut:
    return await run_supervised(
        "tests.support.timed_probe:span",
        inp,
        SpanOut,
        env={"PYTHONPATH": str(ROOT)},
        lease=lease,  # type: ignore[arg-type]
    )


@activity.defn(name="probe-untimed")
async def untimed(inp: NapIn) -> SpanOut:
    return await _span(inp, "shared")


@activity.defn(name="probe-timed")
async def timed(inp: NapIn) -> SpanOut:
    return await _span(inp, "exclusive")


UNTIMED, TIMED = [("probe-untimed", 5.0)] * 3, [("probe-timed", 0.5)] * 2
CALLS = UNTIMED + TIMED


@workflow.defn(name="gpu-slots-probe")
class SlotsProbe:
    @workflow.run
    async def run(self, gpu_queue: str) -> list[list[float]]:
        def call(name: str, seconds: float) -> Any:
            return workflow.execute_activity(
                name,
                NapIn(seconds=seconds),
                result_type=SpanOut,
                task_queue=gpu_queue,
                start_to_close_timeout=timedelta(seconds=120),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )

        untimed = [asyncio.ensure_future(call(*c)) for c in UNTIMED]
        # the untimed ones take the lease first (a timed one waiting at the turnstile would
        # queue the rest behind it): then they must overlap, and each timed one wait
        await workflow.sleep(timedelta(seconds=3))
        spans = await asyncio.gather(*untimed, *(call(*c) for c in TIMED))
        return [[s.started, s.ended] for s in spans]


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def test_untimed_activities_overlap_and_timed_ones_run_alone(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")  # as a GPU worker pins itself
    suffix = uuid.uuid4().hex[:8]
    gpu_queue, cpu_queue = f"gpu-slots-{suffix}", f"cpu-slots-{suffix}"
    gpu = worker.build_gpu_worker(client, gpu_queue, activities=[untimed, timed], slots=4)
    flows = Worker(
        client,
        task_queue=cpu_queue,
        workflows=[SlotsProbe],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with gpu, flows:
        spans = await client.execute_workflow(
            SlotsProbe.run, gpu_queue, id=f"gpu-slots-{suffix}", task_queue=cpu_queue
        )
    named = list(zip([name for name, _ in CALLS], spans, strict=True))
    for i, (name, span) in enumerate(named):
        if name == "probe-timed":
            others = [s for j, (_, s) in enumerate(named) if j != i]
            assert not any(_overlap(span, s) for s in others), (name, span, named)
    shared = [s for name, s in named if name == "probe-untimed"]
    pairs = [(a, b) for i, a in enumerate(shared) for b in shared[i + 1 :]]
    assert any(_overlap(a, b) for a, b in pairs), "the slots ran nothing at once"
