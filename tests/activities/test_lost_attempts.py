"""An attempt cut by its worker's shutdown says how long it held the GPU.

The built-in proposer's GPU step (whole-model compiles, minutes on a large model) is the
step a lost machine cuts most; its failure carries the time held, earlier attempts
included, so the workflow can charge it (``workflows.machine_loss``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import activities.search_activities as search_activities
from activities.search_activities import propose_builtin_on_gpu
from kernelopt.contracts.search import BuiltinProposeResult
from tests.support.lost_attempts import cut_by_shutdown, retry_environment


@pytest.fixture
def slow_proposer(monkeypatch: pytest.MonkeyPatch) -> None:
    def propose(inp: Any, store: Any) -> BuiltinProposeResult:
        time.sleep(0.6)
        return BuiltinProposeResult(variants=[], note="compiled")

    async def as_is(inp: Any) -> Any:
        return inp

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the worker-thread path
    monkeypatch.setattr(search_activities.builtin, "propose", propose)
    monkeypatch.setattr(search_activities, "resolve_scope", as_is)
    monkeypatch.setattr(search_activities, "open_store", lambda: None)


async def test_a_finished_attempt_charges_its_run_time_and_the_earlier_attempts(
    slow_proposer: None,
) -> None:
    env, beats = retry_environment(30.0)
    out = await env.run(propose_builtin_on_gpu, object())
    assert out.note == "compiled"
    assert out.device_seconds is not None and 30.6 <= out.device_seconds < 45.0
    assert beats and all(b[0] is None and b[1] >= 30.0 for b in beats)


async def test_an_attempt_cut_by_the_worker_shutdown_reports_what_it_held(
    slow_proposer: None,
) -> None:
    env, _ = retry_environment(30.0)
    failure = await cut_by_shutdown(env, propose_builtin_on_gpu, object(), after_s=0.3)
    assert failure.type == "WorkerShutdown"
    assert 30.3 <= failure.details[0] < 45.0


async def test_a_cancel_without_a_shutdown_stays_a_cancel(slow_proposer: None) -> None:
    env, _ = retry_environment(0.0)

    async def cancel_soon() -> None:
        await asyncio.sleep(0.3)
        env.cancel()

    stopper = asyncio.create_task(cancel_soon())
    with pytest.raises(asyncio.CancelledError):
        await env.run(propose_builtin_on_gpu, object())
    await stopper
