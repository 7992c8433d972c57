"""Random faults judged against an undisturbed campaign kept in the home, for real GPU workers.

On a real GPU, which candidate is fastest (screening, gate 4, the beam) depends on
timing, so a faulty campaign's decisions are compared with the reference and counted,
not required equal; what does not depend on timing must agree: the same code gets the
same verdicts at gates 1-3.  The reference is run once and kept beside the server's
database (``reference-audit.json``), so one device call can run it and the next, on
the same warm machine, the faults.  ``tests/e2e/test_gpu_random_faults.py`` runs this
with the real GPU worker; ``test_random_faults.py`` runs it over the doubles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from kernelopt.audit.model import AuditReport, CandidateAudit
from kernelopt.campaigns import prepare_problem, start_campaign
from kernelopt.client import connect
from kernelopt.code_version import code_fingerprint
from kernelopt.config import Settings
from kernelopt.contracts import CampaignOptions
from kernelopt.contracts.verdicts import GateName
from kernelopt.store import open_store
from tests.durability.random_faults import ChaosRun, Judged, judge_run, run_chaos
from tests.durability.support import DevServer, assert_consistent, decisions_of, reference_report

KEPT = "reference-audit.json"
KEPT_CODE = "reference-code.txt"  # code_fingerprint() of the code that made the kept reference
UNTIMED = {GateName.STATIC, GateName.CORRECTNESS, GateName.MODEL}


@dataclass
class FaultPlan:
    """What campaigns run where, and how the faults strike."""

    problem: Path
    options: Callable[[str, str], CampaignOptions]  # (cpu queue, gpu queue) -> options
    gpu_kind: str = "gpu"
    worker_env: dict[str, str] = field(default_factory=dict)
    reference_s: float = 120.0
    gap_s: tuple[float, float] = (0.5, 3.0)
    down_s: tuple[float, float] = (0.2, 3.0)
    finish_s: float = 300.0
    ready_s: float = 60.0


@dataclass
class FaultResult:
    reference: AuditReport
    run: ChaosRun | None = None
    judged: Judged | None = None
    campaigns: dict[str, dict[str, Any]] = field(default_factory=dict)

    def disagreements(self) -> list[str]:
        return [d for c in self.campaigns.values() for d in c["untimed_disagreements"]]


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


def _starter(settings: Settings, plan: FaultPlan) -> Callable[[Client, str, str], Any]:
    async def start(client: Client, cpu_queue: str, gpu_queue: str) -> WorkflowHandle:
        problem = prepare_problem(plan.problem, open_store(settings.artifacts_dir), level=None)
        return await start_campaign(client, problem, plan.options(cpu_queue, gpu_queue))

    return start


async def kept_reference(settings: Settings, plan: FaultPlan, logs: Path) -> AuditReport:
    """The home's undisturbed campaign, run on the first call and read back after; a
    reference kept by other product code (``code_fingerprint``) is refused, not compared:
    another tree's gates may rightly give other verdicts."""
    kept, code = settings.home / KEPT, settings.home / KEPT_CODE
    if kept.is_file():
        made_by = code.read_text().strip() if code.is_file() else "unknown code"
        if made_by != code_fingerprint():
            raise RuntimeError(
                f"{kept} was made by other product code ({made_by[:12]}): delete it and"
                " run the reference again (KERNELOPT_GPU_FAULTS=0) with this tree"
            )
        return AuditReport.model_validate_json(kept.read_text())
    server = DevServer(settings).start()
    try:
        client = await connect(settings, start_embedded=False)
        reference = await reference_report(
            client,
            settings,
            logs,
            start=_starter(settings, plan),
            gpu_kind=plan.gpu_kind,
            worker_env=plan.worker_env,
            timeout_s=plan.reference_s,
        )
    finally:
        server.stop()
    kept.write_text(reference.model_dump_json())
    code.write_text(code_fingerprint())
    return reference


async def faults_against_kept_reference(
    settings: Settings, plan: FaultPlan, logs: Path, seed: int, kills: int
) -> FaultResult:
    """The kept reference (run first if the home has none), then ``kills`` seeded faults
    (none: the reference alone) with one GPU worker, then every campaign judged."""
    result = FaultResult(reference=await kept_reference(settings, plan, logs / "reference"))
    if kills == 0:
        return result
    result.run = await run_chaos(
        settings,
        logs,
        seed,
        kills,
        gap_s=plan.gap_s,
        down_s=plan.down_s,
        finish_timeout_s=plan.finish_s,
        start=_starter(settings, plan),
        gpu_kind=plan.gpu_kind,
        gpu_workers=1,
        worker_env=plan.worker_env,
        ready_s=plan.ready_s,
    )

    async def consistent(client: Client, workflow_id: str) -> None:
        outcome, report = await assert_consistent(client, settings, workflow_id)
        same = decisions_of(report).items() & decisions_of(result.reference).items()
        result.campaigns[workflow_id] = {
            "outcome": outcome.category.value,
            "speedup": outcome.speedup,
            "decisions": len(report.candidates),
            "same_as_reference": len(same),
            "untimed_disagreements": timing_free_disagreements(report, result.reference),
        }

    result.judged = await judge_run(settings, result.run, consistent)
    return result
