"""Random SIGKILLs of the CPU worker, the real GPU worker and the server on the GPU host.

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m pytest -m gpu tests/e2e/test_gpu_random_faults.py

The CPU variant (tests/durability/test_random_faults.py) runs over the GPU doubles;
here the GPU worker is the product's own (its GPU pinned, its compiler caches, the
reference bundles and the gates' zygote) running the real activities, each physical
execution counted (``worker_main`` kind ``gpu-real``). An undisturbed campaign runs
first and is kept in the home (``tests.durability.kept_reference_faults``); it also
fills the compile cache, so the faulty campaigns reach their gates quickly. Then
``KERNELOPT_GPU_FAULTS`` (default 10) seeded kills strike while two campaigns at a time
run, and every campaign must end in an outcome whose audit holds, gate no candidate
twice, compute no GPU result twice (but for a SIGKILL between its end and its store
write), replay on today's workflow code, and give the same code the same gate 1-3
verdicts as the reference (timing-dependent decisions are counted, not required equal).

On one H200 the reference and the faults each take a call of their own on the
still-warm machine (docs/TEAM_NOTES.md, "Measured in the seventeenth session")::

    export KERNELOPT_GPU_FAULTS_HOME=/tmp/gpu-faults-home
    KERNELOPT_GPU_FAULTS=0 python3 -m pytest -m gpu tests/e2e/test_gpu_random_faults.py
    python3 -m pytest -m gpu tests/e2e/test_gpu_random_faults.py
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.durability.kept_reference_faults import FaultPlan, faults_against_kept_reference
from tests.durability.support import decisions_of
from tests.durability.worker_main import LOG_LEVEL_ENV, REAL_GPU
from tests.e2e.conftest import ROOT
from tests.support.campaigns import smallest_gpu_options
from tests.support.temporal import make_settings

pytestmark = pytest.mark.gpu

HEARTBEAT_S = 15.0  # the product's floor is 10 s: supervised GPU children beat every 5 s
PLAN = FaultPlan(
    problem=ROOT / "problems" / "level1" / "001_relu_chain.py",
    options=lambda cpu_q, gpu_q: smallest_gpu_options(cpu_q, gpu_q, heartbeat_s=HEARTBEAT_S),
    gpu_kind=REAL_GPU,
    # every worker: GPU call sites time out after HEARTBEAT_S (the CPU worker runs the workflows)
    # and log what they run, so a stuck campaign can be read from the logs
    worker_env={"KERNELOPT_TEST_HEARTBEAT_S": str(HEARTBEAT_S), LOG_LEVEL_ENV: "info"},
    # a fresh H200's first campaign compiles and builds its caches (TEAM_NOTES has the times)
    reference_s=450.0,
    gap_s=(2.0, 8.0),
    down_s=(0.5, 4.0),
    finish_s=330.0,
    ready_s=120.0,
)


async def test_ten_random_faults_with_real_gpu_workers(
    tmp_path: Path, gpu_out: Path, record: Callable[..., None]
) -> None:
    """``KERNELOPT_GPU_FAULTS_HOME``: a home kept across calls (the reference and the
    compile cache in it); ``KERNELOPT_GPU_FAULTS=0``: the reference campaign alone."""
    kills = int(os.environ.get("KERNELOPT_GPU_FAULTS", "10"))
    fixed = os.environ.get("KERNELOPT_FAULT_SEED")
    seed = int(fixed) if fixed else random.SystemRandom().randrange(1, 2**31)
    settings = make_settings(Path(os.environ.get("KERNELOPT_GPU_FAULTS_HOME", tmp_path / "home")))
    result = await faults_against_kept_reference(
        settings, PLAN, gpu_out / "random-faults", seed, kills
    )
    record("random_faults", seed=seed, reference=decisions_of(result.reference))
    if kills == 0:
        return
    run, judged = result.run, result.judged
    assert run is not None and judged is not None
    record(
        "random_faults",
        run=run.summary(),
        kills=[vars(k) for k in run.kills],
        judged={**vars(judged), "twice": {str(k): n for k, n in judged.twice.items()}},
        campaigns=result.campaigns,
    )
    print(f"\n{run.summary()}\n{judged.summary(len(run.campaigns))}\n{result.campaigns}")
    assert len(run.kills) == kills
    assert not judged.replay_failures, judged.replay_failures
    assert not judged.twice, f"GPU results computed twice (seed {seed}): {judged.twice}"
    assert not result.disagreements(), result.campaigns
