"""Random SIGKILLs of the CPU worker, the GPU workers and the server; every campaign ends soundly.

Each run injects seeded random faults (``random_faults.run_chaos``; the seed is
printed, and ``KERNELOPT_FAULT_SEED`` repeats one) into campaigns on the real
dev server with real worker processes and the GPU doubles, then checks for
every campaign: the same decisions and outcome as an undisturbed reference
(``assert_sound``: audit checks, no candidate gated twice), no GPU result
computed twice (physical executions counted by the GPU workers themselves),
and every run's history replays on today's workflow code (``Replayer``).

The default run injects 4 faults (under half a minute on a CI machine); the ``slow``
ones 10 and 50, and run only when asked for (``-m slow`` or ``KERNELOPT_RUN_SLOW=1``).
A fresh seed each run: over CI's runs the default variant meets many fault places.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from temporalio.client import Client

from kernelopt.audit.model import AuditReport, CandidateAudit
from kernelopt.code_version import code_fingerprint
from kernelopt.contracts.base import ArtifactRef
from kernelopt.contracts.verdicts import GateName, GateStatus, GateVerdict
from tests.durability.kept_reference_faults import (
    KEPT,
    KEPT_CODE,
    FaultPlan,
    faults_against_kept_reference,
    timing_free_disagreements,
)
from tests.durability.random_faults import judge_run, run_chaos
from tests.durability.support import PROBLEM, assert_sound
from tests.support.campaigns import smallest_gpu_options
from tests.support.temporal import make_settings


def _seed() -> int:
    fixed = os.environ.get("KERNELOPT_FAULT_SEED")
    return int(fixed) if fixed else random.SystemRandom().randrange(1, 2**31)


def _slow_wanted(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return os.environ.get("KERNELOPT_RUN_SLOW") == "1" or (
        "slow" in expr and "not slow" not in expr
    )


async def _check(reference: AuditReport, tmp_path: Path, kills: int) -> None:
    seed = _seed()
    print(f"\nrandom faults: seed {seed} (KERNELOPT_FAULT_SEED={seed} repeats it)")
    settings = make_settings(tmp_path / "home")
    run = await run_chaos(settings, tmp_path / "logs", seed, kills)
    print(run.summary())

    async def sound(client: Client, workflow_id: str) -> None:
        await assert_sound(client, settings, workflow_id, reference)

    judged = await judge_run(settings, run, sound)
    print(judged.summary(len(run.campaigns)))
    assert not judged.replay_failures, judged.replay_failures
    assert not judged.twice, f"GPU results computed twice (seed {seed}): {judged.twice}"
    assert len(run.kills) == kills


async def test_four_random_faults(reference: AuditReport, tmp_path: Path) -> None:
    await _check(reference, tmp_path, kills=4)


@pytest.mark.slow
@pytest.mark.parametrize("kills", [10, 50])
async def test_more_random_faults(
    reference: AuditReport, tmp_path: Path, request: pytest.FixtureRequest, kills: int
) -> None:
    if not _slow_wanted(request.config):
        pytest.skip("slow: run with -m slow or KERNELOPT_RUN_SLOW=1")
    await _check(reference, tmp_path, kills=kills)


@pytest.mark.slow  # ~27 s; the device scripts' two-call flow, over the doubles
async def test_faults_against_a_reference_kept_in_the_home(tmp_path: Path) -> None:
    """The GPU host's two-call flow over the doubles: one call runs the reference and keeps
    it in the home, the next reads it back and runs three faults; the doubles decide the
    same way every time, so every decision of every faulty campaign agrees."""
    settings = make_settings(tmp_path / "home")
    plan = FaultPlan(problem=PROBLEM, options=smallest_gpu_options)
    seed = _seed()
    print(f"seed {seed} (KERNELOPT_FAULT_SEED repeats it)")  # shown with any failure below
    first = await faults_against_kept_reference(settings, plan, tmp_path / "logs1", seed, 0)
    assert first.run is None and (settings.home / KEPT).is_file()
    second = await faults_against_kept_reference(settings, plan, tmp_path / "logs2", seed, 3)
    assert second.reference == first.reference
    assert second.run is not None and second.judged is not None
    assert len(second.run.kills) == 3 and second.campaigns
    assert not second.judged.replay_failures and not second.judged.twice
    assert not second.disagreements()
    agree = [c["same_as_reference"] == c["decisions"] > 0 for c in second.campaigns.values()]
    assert all(agree), (seed, second.campaigns)


async def test_a_reference_kept_by_other_code_is_refused(tmp_path: Path) -> None:
    """The two calls must run one tree: a kept reference from other product code would
    blame the faults for verdicts the code change made."""
    settings = make_settings(tmp_path / "home")
    settings.home.mkdir(parents=True, exist_ok=True)
    (settings.home / KEPT).write_text(AuditReport(campaign_id="c").model_dump_json())
    (settings.home / KEPT_CODE).write_text("0" * 64)
    plan = FaultPlan(problem=PROBLEM, options=smallest_gpu_options)
    with pytest.raises(RuntimeError, match="other product code"):
        await faults_against_kept_reference(settings, plan, tmp_path / "logs", 1, 0)
    (settings.home / KEPT_CODE).write_text(code_fingerprint())
    kept = await faults_against_kept_reference(settings, plan, tmp_path / "logs", 1, 0)
    assert kept.reference.campaign_id == "c"


def _candidate(source_byte: str, *statuses: GateStatus) -> CandidateAudit:
    gates = [GateName.STATIC, GateName.CORRECTNESS, GateName.MODEL, GateName.PERFORMANCE]
    return CandidateAudit(
        id="k:i0-s0-v0",
        target_id="k",
        source=ArtifactRef(sha256=source_byte * 64, size=1),
        verdicts=[
            GateVerdict(gate=g, status=s, reason="")
            for g, s in zip(gates[: len(statuses)], statuses, strict=True)
        ],
    )


def test_only_untimed_verdicts_of_the_same_code_must_agree() -> None:
    ok, fail = GateStatus.PASS, GateStatus.FAIL

    def report(candidate: CandidateAudit) -> AuditReport:
        return AuditReport(campaign_id="c", candidates=[candidate])

    reference = report(_candidate("a", ok, ok, ok, ok))
    assert timing_free_disagreements(report(_candidate("a", ok, fail)), reference)
    assert not timing_free_disagreements(report(_candidate("b", ok, fail)), reference)  # other code
    assert not timing_free_disagreements(report(_candidate("a", ok, ok)), reference)  # gated less
    assert not timing_free_disagreements(report(_candidate("a", ok, ok, ok, fail)), reference)
