"""Campaigns end to end on the GPU host, as ``kernelopt optimize`` runs them.

    source scripts/device_env.sh; python3 -m pytest -m gpu tests/e2e/test_gpu_campaigns.py

The embedded Temporal server and the local workers (one CPU worker, one GPU worker
per GPU) start as ``kernelopt optimize`` starts them, once for the module; campaigns
use the built-in proposer and the smallest search that still runs every step (the
whole-forward target and one kernel target, two candidates a round, the best one
gated, screening on).  Each test leaves outcomes, histories and the activity table
(``kernelopt.bench.costs``) in ``gpu_out``.  Needs the Temporal binary (carry
``.device``).

Device time (one H200, cold caches; estimated, not measured yet): ~25 s of worker
start, then ~150-200 s for the first campaign (compile, triage, two searches, re-stitch,
gate_model; more if a cold Inductor-regeneration round compiles for long) and
~120-160 s for each fault test (the compile is a cache hit, and so are most
regenerations: same problem and home), ~450 s in all.  Before (three targets, three
candidates a round, beam 2, a retry round, workers started per test, a cold GEMM
compile for the fault tests) the first campaign alone ran past 250 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernelopt.bench.costs import dump_histories
from kernelopt.config import Settings
from kernelopt.contracts import (
    CampaignOptions,
    Outcome,
    OutcomeCategory,
)
from kernelopt.store import ArtifactStore
from tests.e2e.conftest import ROOT
from tests.e2e.faults import kill_gpu_worker
from tests.support.campaigns import smallest_gpu_options

pytestmark = pytest.mark.gpu

PROBLEMS = [ROOT / "problems" / "level1" / "001_relu_chain.py"]
# The fault tests' claim is about the lost worker, not the problem: the relu chain's
# compile is already in the store's cache after the first test (a cold max-autotune
# GEMM compile took 50-70 s), so a gate starts well inside the fault's waiting window.
FAULT_PROBLEM = PROBLEMS[0]
# a small campaign ends in ~2-3 min, but a cold Inductor-regeneration round may compile
# for up to its 240-s budget first (kernelopt/proposer/regen/family.py)
CAMPAIGN_S = 420.0
FAULT_WAIT_S = 180.0  # how long the fault waits for a gate_candidate to be under way


@pytest.fixture(scope="module")
async def module_workers(gpu_settings: Settings) -> AsyncIterator[Any]:
    """A client of the embedded server and the local workers, started once for the module
    (the GPU worker's zygote alone takes ~20 s) and stopped at its end."""
    from kernelopt.client import connect
    from kernelopt.local_workers import ensure_local_workers, stop_local_workers

    client = await connect(gpu_settings)
    ensure_local_workers(gpu_settings)
    try:
        yield client
    finally:
        stop_local_workers(gpu_settings, wait_s=5)


@pytest.fixture
def local_client(module_workers: Any, gpu_settings: Settings) -> Any:
    """The module's client, with every planned worker running: a fault test replaces the
    GPU worker it killed or froze, and this starts any that is missing (idempotent)."""
    from kernelopt.local_workers import ensure_local_workers

    ensure_local_workers(gpu_settings)
    return module_workers


def _options(settings: Settings, heartbeat_s: float | None = None) -> CampaignOptions:
    """The smallest campaign that still runs every step, on the local workers' queues."""
    from kernelopt.campaigns import default_gpu_queue

    return smallest_gpu_options(settings.cpu_queue, default_gpu_queue(settings), heartbeat_s)


async def _run(client: Any, store: ArtifactStore, path: Path, options: CampaignOptions) -> Any:
    from kernelopt.campaigns import prepare_problem, start_campaign

    problem = prepare_problem(path, store, level=None)
    handle = await start_campaign(client, problem, options)
    outcome = await asyncio.wait_for(handle.result(), CAMPAIGN_S)
    return handle.id, outcome


def _keep_logs(settings: Settings, out: Path) -> None:
    for name in ("cpu", "gpu0"):
        log = settings.home / "workers" / f"{name}.log"
        if log.is_file():
            shutil.copy(log, out / f"worker-{name}.log")


async def test_campaign_ends_in_an_outcome_and_charges_what_the_gpu_ran(
    local_client: Any, gpu_settings: Settings, gpu_store: ArtifactStore, gpu_out: Path
) -> None:
    """A campaign submitted as ``kernelopt optimize`` submits it ends in an outcome with at
    least one candidate tried, gates each candidate to completion once, and charges at
    least the GPU run time its activities reported."""
    for path in PROBLEMS:
        campaign_id, outcome = await _run(local_client, gpu_store, path, _options(gpu_settings))
        assert isinstance(outcome, Outcome)
        (gpu_out / f"{campaign_id}.outcome.json").write_text(outcome.model_dump_json(indent=2))
        assert outcome.category in set(OutcomeCategory)
        assert outcome.candidates_tried >= 1
        gated, held = await dump_histories(local_client, [campaign_id], gpu_out)
        assert all(n == 1 for n in gated.values()), gated
        # the budget charges at least what the GPU activities reported running
        assert outcome.used.gpu_seconds >= held.get(campaign_id, 0.0) - 1.0
    _keep_logs(gpu_settings, gpu_out)


@pytest.mark.parametrize("freeze", [False, True], ids=["killed", "frozen"])
async def test_a_lost_gpu_worker_costs_a_retry_not_a_second_gate(
    freeze: bool,
    local_client: Any,
    gpu_settings: Settings,
    gpu_store: ArtifactStore,
    gpu_out: Path,
) -> None:
    """The GPU worker is SIGKILLed (or SIGSTOPped: alive but silent) during a gate; a new
    worker takes the activity over after the heartbeat timeout, and the campaign still
    ends with no candidate gated to completion twice."""
    import time

    fault: dict[str, Any] = {}
    killer = asyncio.create_task(
        kill_gpu_worker(gpu_settings, time.monotonic() + 5.0, fault, freeze, wait_s=FAULT_WAIT_S)
    )
    try:
        campaign_id, outcome = await _run(
            local_client, gpu_store, FAULT_PROBLEM, _options(gpu_settings, heartbeat_s=15.0)
        )
    finally:
        killer.cancel()
        for pid in fault.get("frozen_pids", []):  # the stuck worker never comes back
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
    assert "error" not in fault, fault
    assert fault.get("killed_pid"), "no GPU activity was under way to interrupt"
    assert fault.get("gate_under_way"), f"no gate_candidate was under way: {fault}"
    assert isinstance(outcome, Outcome)
    out = gpu_out / ("frozen" if freeze else "killed")
    out.mkdir(exist_ok=True)
    gated, _ = await dump_histories(local_client, [campaign_id], out)
    assert sorted(c for c, n in gated.items() if n > 1) == []
    _keep_logs(gpu_settings, out)
