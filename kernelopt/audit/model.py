"""The audit of one campaign as data: what ``kernelopt audit --json`` prints.

Built from Temporal histories (live or exported) by ``collect``; rendered as a
terminal table, JSON or a self-contained HTML page.  One row per candidate
(its evaluation and, for winners, its re-timing merged), the model-level
trials, budgets with every change, control events (pause, resume, cancel,
budget updates), infrastructure incidents (retried or timed-out activities)
and consistency checks over the whole trail.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernelopt.contracts import ArtifactRef, Budgets, BudgetUse, GateVerdict, Outcome
from kernelopt.contracts.screening import ScreeningEstimate

from .moves import StateMove


class AuditModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PromptRef(AuditModel):
    """One LLM call behind a candidate (planner / executor / retry_fix), from the ledger."""

    role: str
    call_id: str
    prompt: ArtifactRef | None = None
    reply: ArtifactRef | None = None
    tokens: int = 0
    usd: float = 0.0


class RetimeAudit(AuditModel):
    ok: bool
    reason: str
    kernel_ms: float | None = None
    baseline_kernel_ms: float | None = None
    speedup: float | None = None
    at: str = ""


class CandidateAudit(AuditModel):
    """One candidate: lineage, artifacts, every gate verdict, and what finally became of it."""

    id: str
    target_id: str
    parent_id: str | None = None
    iteration: int = 0
    attempt: int = 0
    proposer: str = ""
    plan_direction: str = ""
    plan_description: str = ""
    label: str = ""
    source: ArtifactRef | None = None
    conversation: ArtifactRef | None = None
    prompts: list[PromptRef] = Field(default_factory=list)
    # the first tier: the search's untrusted screening estimate, and whether it earned gates
    screening: ScreeningEstimate | None = None
    verdicts: list[GateVerdict] = Field(default_factory=list)
    passed_gates_1_2: bool = False
    deciding_gate: str = ""  # the first gate (or step) that stopped it; empty when it passed
    reason: str = ""
    kernel_ms: float | None = None
    baseline_kernel_ms: float | None = None
    speedup: float | None = None  # per-kernel, first measurement
    at: str = ""  # workflow time of the decision
    retime: RetimeAudit | None = None
    provisional: bool = False  # reconstructed from a running search's activities
    final: str = ""  # shipped / rejected / screened_out / dropped / superseded / not_kept / pending / unverified
    final_reason: str = ""


class ModelTrial(AuditModel):
    """One re-stitched model through gates 3-4 (the campaign adds one winner at a time)."""

    index: int
    targets: list[str]
    candidates: list[str] = Field(default_factory=list)
    added: str = ""  # the target this trial added to the kept set
    wrapper: ArtifactRef | None = None
    verdicts: list[GateVerdict] = Field(default_factory=list)
    passed: bool = False
    speedup: float | None = None
    category: str = ""
    kept: bool = False
    at: str = ""


class TargetAudit(AuditModel):
    target_id: str
    workflow_id: str = ""
    runs: int = 0  # runs of its SearchKernel (continue-as-new boundaries + 1)
    status: str = ""
    proposer: str = ""
    candidates_tried: int = 0
    candidates_compiled: int = 0
    best: str | None = None
    best_kernel_speedup: float | None = None
    stopped_reason: str = ""
    tokens: int = 0
    usd: float = 0.0
    gpu_seconds: float = 0.0
    finished_at: str = ""


class ControlEvent(AuditModel):
    """A signal or update someone sent the campaign (who, what, when, and its answer)."""

    at: str
    kind: str  # signal / update
    name: str
    args: list[Any] = Field(default_factory=list)
    identity: str = ""
    result: Any = None
    workflow_id: str = ""


class Incident(AuditModel):
    """An activity that needed more than one attempt, or failed: infrastructure, not verdicts."""

    at: str
    workflow_id: str
    activity: str
    activity_id: str
    attempts: int
    outcome: str  # completed / failed / timed_out / cancelled / scheduled (still waiting)
    last_failure: str = ""


class BudgetPoint(AuditModel):
    """Cumulative use after one finished search (for the budget plot)."""

    at: str
    target_id: str
    tokens: int = 0
    usd: float = 0.0
    gpu_seconds: float = 0.0


class AuditCheck(AuditModel):
    name: str
    ok: bool
    detail: str = ""


class RunInfo(AuditModel):
    workflow_id: str
    run_id: str
    workflow_type: str
    status: str
    events: int = 0


class AuditReport(AuditModel):
    campaign_id: str
    problem: str = ""
    source: str = ""  # "live" (server history) or "export <sha>" (artifact store)
    status: str = ""  # running / completed / cancelled / ...
    # what a running campaign waits for right now (a worker nobody runs); live audits only
    waiting: list[str] = Field(default_factory=list)
    phase: str = ""
    proposer: str = ""
    started_at: str = ""
    closed_at: str = ""
    outcome: Outcome | None = None
    budgets: Budgets = Budgets()
    budgets_initial: Budgets = Budgets()
    used: BudgetUse = BudgetUse()
    budget_timeline: list[BudgetPoint] = Field(default_factory=list)
    targets: list[TargetAudit] = Field(default_factory=list)
    candidates: list[CandidateAudit] = Field(default_factory=list)
    model_trials: list[ModelTrial] = Field(default_factory=list)
    controls: list[ControlEvent] = Field(default_factory=list)
    incidents: list[Incident] = Field(default_factory=list)
    runs: list[RunInfo] = Field(default_factory=list)
    checks: list[AuditCheck] = Field(default_factory=list)
    # machine losses and the imports that resumed the campaign (kernelopt/audit/moves.py)
    moves: list[StateMove] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def rejections_by_gate(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.candidates:
            if not c.passed_gates_1_2 and c.deciding_gate:
                counts[c.deciding_gate] = counts.get(c.deciding_gate, 0) + 1
            if c.retime is not None and not c.retime.ok:
                counts["retime"] = counts.get("retime", 0) + 1
        for t in self.model_trials:
            if not t.passed:
                failed = next((v for v in t.verdicts if not v.passed), None)
                gate = failed.gate.value if failed else "model"
                counts[gate] = counts.get(gate, 0) + 1
        return counts


__all__ = [
    "AuditCheck",
    "AuditReport",
    "BudgetPoint",
    "CandidateAudit",
    "ControlEvent",
    "Incident",
    "ModelTrial",
    "PromptRef",
    "RetimeAudit",
    "RunInfo",
    "TargetAudit",
]
