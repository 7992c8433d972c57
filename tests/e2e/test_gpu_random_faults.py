"""Random SIGKILLs of the CPU worker, the real GPU worker and the server on the GPU host.

    source scripts/device_env.sh; python3 -m pytest -m gpu tests/e2e/test_gpu_random_faults.py

The CPU variant (tests/durability/test_random_faults.py) runs over the GPU doubles;
here the GPU worker is the product's own (its GPU pinned, its compiler caches, the
reference bundles and the gates' zygote) running the real activities, each physical
execution counted (``worker_main`` kind ``gpu-real``). An undisturbed campaign runs
first: it is the reference, and it fills the compile cache, so the faulty campaigns
reach their gates quickly. Then ``KERNELOPT_GPU_FAULTS`` (default 10) seeded kills
strike while two campaigns at a time run, and every campaign must end in an outcome
whose audit holds, gate no candidate twice, compute no GPU result twice (but for a
SIGKILL between its end and its store write), and replay on today's workflow code.

Against the reference: on a real GPU, which candidate is fastest (screening, gate 4,
the beam) depends on timing, so those decisions are compared and counted, not required
equal. What does not depend on timing must agree: the same code gets the same verdicts
at gates 1-3.

Device time (one H200; estimated): the reference ~150-200 s, the faults ~60-120 s, the
faulty campaigns' finish ~120-200 s.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from kernelopt.audit.model import AuditReport, CandidateAudit
from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.client import connect
from kernelopt.contracts.verdicts import GateName
from kernelopt.store import open_store
from tests.durability.random_faults import judge_run, run_chaos
from tests.durability.support import DevServer, assert_consistent, decisions_of, reference_report
from tests.durability.worker_main import REAL_GPU
from tests.e2e.conftest import ROOT
from tests.support.campaigns import smallest_gpu_options
from tests.support.temporal import make_settings

pytestmark = pytest.mark.gpu

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"
HEARTBEAT_S = 15.0  # the product's floor is 10 s: supervised GPU children beat every 5 s
# every worker: GPU call sites time out after HEARTBEAT_S (the CPU worker runs the workflows)
WORKER_ENV = {"KERNELOPT_TEST_HEARTBEAT_S": str(HEARTBEAT_S)}
UNTIMED = {GateName.STATIC, GateName.CORRECTNESS, GateName.MODEL}


def _untimed_verdicts(candidate: CandidateAudit) -> tuple:
    return tuple((v.gate, v.status) for v in candidate.verdicts if v.gate in UNTIMED)


def timing_free_disagreements(report: AuditReport, reference: AuditReport) -> list[str]:
    """Candidates with the same id and code in both runs whose gate 1-3 verdicts differ
    (a candidate gated in only one run is a timing-dependent choice, not a disagreement)."""
    theirs = {c.id: c for c in reference.candidates}
    out = []
    for mine in report.candidates:
        other = theirs.get(mine.id)
        if other is None or mine.source != other.source:
            continue
        a, b = _untimed_verdicts(mine), _untimed_verdicts(other)
        if a and b and a != b[: len(a)] and b != a[: len(b)]:
            out.append(f"{mine.id}: {a} against {b}")
    return out


def _starter(settings: Any) -> Callable[[Client, str, str], Any]:
    async def start(client: Client, cpu_queue: str, gpu_queue: str) -> WorkflowHandle:
        problem = prepare_problem(PROBLEM, open_store(settings.artifacts_dir), level=None)
        options = smallest_gpu_options(cpu_queue, gpu_queue, heartbeat_s=HEARTBEAT_S)
        return await start_campaign(client, problem, options)

    return start


async def _reference(settings: Any, logs: Path) -> AuditReport:
    server = DevServer(settings).start()
    try:
        client = await connect(settings, start_embedded=False)
        return await reference_report(
            client,
            settings,
            logs,
            start=_starter(settings),
            gpu_kind=REAL_GPU,
            worker_env=WORKER_ENV,
            timeout_s=300.0,
        )
    finally:
        server.stop()


async def test_ten_random_faults_with_real_gpu_workers(
    tmp_path: Path, gpu_out: Path, record: Callable[..., None]
) -> None:
    kills = int(os.environ.get("KERNELOPT_GPU_FAULTS", "10"))
    fixed = os.environ.get("KERNELOPT_FAULT_SEED")
    seed = int(fixed) if fixed else random.SystemRandom().randrange(1, 2**31)
    settings = make_settings(tmp_path / "home")
    logs = gpu_out / "random-faults"
    reference = await _reference(settings, logs / "reference")
    record("random_faults", seed=seed, reference=decisions_of(reference))
    run = await run_chaos(
        settings,
        logs,
        seed,
        kills,
        gap_s=(2.0, 8.0),
        down_s=(0.5, 4.0),
        finish_timeout_s=330.0,
        start=_starter(settings),
        gpu_kind=REAL_GPU,
        gpu_workers=1,
        worker_env=WORKER_ENV,
        ready_s=120.0,
    )
    record("random_faults", run=run.summary(), kills=[vars(k) for k in run.kills])
    agreement: dict[str, Any] = {}

    async def consistent(client: Client, workflow_id: str) -> None:
        outcome, report = await assert_consistent(client, settings, workflow_id)
        same = decisions_of(report).items() & decisions_of(reference).items()
        agreement[workflow_id] = {
            "outcome": outcome.category.value,
            "speedup": outcome.speedup,
            "decisions": len(report.candidates),
            "same_as_reference": len(same),
            "untimed_disagreements": timing_free_disagreements(report, reference),
        }

    judged = await judge_run(settings, run, consistent)
    record(
        "random_faults",
        judged={**vars(judged), "twice": {str(k): n for k, n in judged.twice.items()}},
        campaigns=agreement,
    )
    print(f"\n{run.summary()}\n{judged.summary(len(run.campaigns))}\n{agreement}")
    assert len(run.kills) == kills
    assert not judged.replay_failures, judged.replay_failures
    assert not judged.twice, f"GPU results computed twice (seed {seed}): {judged.twice}"
    assert not [d for a in agreement.values() for d in a["untimed_disagreements"]], agreement
