"""From histories to an audit: every candidate, every gate, every decision and why.

Sources, in order of authority: a finished SearchKernel's result (its
``decisions`` and ``ledger``); for a search still running, the state it
carried across continue-as-new plus the gate activities of its current run
(marked provisional); the campaign's restitch / gate_model activities (the
model-level trials) and its outcome.  Signals, updates and retried activities
come straight from the events.  Consistency checks compare the independent
counts (decisions, gate calls, the campaign's own counters, budgets).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowHistory

from kernelopt.campaign_status import status_of
from kernelopt.contracts import (
    Budgets,
    BudgetUse,
    CampaignInput,
    CandidateGateResult,
    Decision,
    ModelGateResult,
    Outcome,
    SearchKernelInput,
    SearchKernelResult,
    names,
)
from kernelopt.contracts.audit import WorkflowRun
from kernelopt.contracts.candidate_id import RETIME_SUFFIX, CandidateId
from kernelopt.contracts.screening import SCREENED_OUT
from kernelopt.contracts.search import LedgerEntry, SearchLogPage, SearchState

from .history import ParsedRun, parse_run
from .model import (
    AuditCheck,
    AuditReport,
    BudgetPoint,
    CandidateAudit,
    ControlEvent,
    Incident,
    ModelTrial,
    PromptRef,
    RetimeAudit,
    RunInfo,
    TargetAudit,
)


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def _model(model: type, value: Any) -> Any:
    if value is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


# what an audit row takes by name from the candidate, and from the decision that judged it
_CANDIDATE_LINEAGE = (
    "id",
    "target_id",
    "parent_id",
    "iteration",
    "attempt",
    "proposer",
    "label",
    "source",
    "conversation",
)
_DECISION_NUMBERS = ("reason", "kernel_ms", "baseline_kernel_ms", "speedup", "at")


def _fields(source: Any, *names: str) -> dict[str, Any]:
    """The named attributes of ``source``: audit rows repeat the history's fields by name."""
    return {name: getattr(source, name) for name in names}


class _Target:
    """One SearchKernel child: its runs, result (if finished) and decisions so far."""

    def __init__(self, workflow_id: str, runs: list[ParsedRun]) -> None:
        self.workflow_id = workflow_id
        self.runs = runs
        first = _model(SearchKernelInput, runs[0].input)
        self.target_id = first.target.id if first else workflow_id.rsplit("/", 1)[-1]
        last = runs[-1]
        self.result: SearchKernelResult | None = (
            _model(SearchKernelResult, last.result) if last.status == "completed" else None
        )
        self.state: SearchState | None = None
        latest_input = _model(SearchKernelInput, last.input)
        if latest_input is not None and latest_input.state:
            self.state = _model(SearchState, latest_input.state)
        self.archived = self._archived(runs)
        self.provisional: list[Decision] = []
        if self.result is None:
            self.provisional = self._provisional(last)
        self.provisional_ids = {d.candidate.id for d in self.provisional}

    @staticmethod
    def _archived(runs: list[ParsedRun]) -> list[SearchLogPage]:
        """Pages the search moved out of its state: their whole text is the activity's input."""
        pages = []
        for run in runs:
            for call in run.activities_named(names.ARCHIVE_SEARCH_LOG):
                page = _model(SearchLogPage, call.input)
                if page is not None:
                    pages.append(page)
        return pages

    @property
    def decisions(self) -> list[Decision]:
        archived = [d for page in self.archived for d in page.decisions]
        if self.result is not None:
            return archived + list(self.result.decisions)
        carried = list(self.state.decisions) if self.state else []
        return archived + carried + self.provisional

    @property
    def ledger(self) -> list[LedgerEntry]:
        archived = [e for page in self.archived for e in page.ledger]
        if self.result is not None:
            return archived + list(self.result.ledger)
        return archived + (list(self.state.ledger) if self.state else [])

    def _provisional(self, run: ParsedRun) -> list[Decision]:
        """Decisions of a running search's current run, rebuilt from its gate activities."""
        from kernelopt.contracts import Candidate

        known = {d.candidate.id for d in (self.state.decisions if self.state else [])}
        known |= {d.candidate.id for page in self.archived for d in page.decisions}
        out = []
        for call in run.activities_named(names.GATE_CANDIDATE):
            result = _model(CandidateGateResult, call.result)
            if result is None or not isinstance(call.input, dict):
                continue
            cid = str(call.input.get("candidate_id", ""))
            retime = cid.endswith(RETIME_SUFFIX)
            cid = cid.removesuffix(RETIME_SUFFIX)
            if cid in known and not retime:
                continue
            parsed = CandidateId.parse(cid)
            failed = next((v for v in result.verdicts if not v.passed), None)
            speed = None
            if result.kernel_ms and result.baseline_kernel_ms:
                speed = result.baseline_kernel_ms / result.kernel_ms
            out.append(
                Decision(
                    candidate=Candidate(
                        id=cid,
                        target_id=self.target_id,
                        parent_id=None,
                        iteration=parsed.iteration if parsed else 0,
                        attempt=parsed.attempt if parsed else 0,
                        source=call.input.get("source"),
                    ),
                    accepted=result.passed,
                    deciding_gate="" if result.passed else (failed.gate.value if failed else ""),
                    reason=(f"passed {result.gates_label}" if result.passed else "")
                    or (failed.reason if failed else ""),
                    verdicts=result.verdicts,
                    kernel_ms=result.kernel_ms,
                    baseline_kernel_ms=result.baseline_kernel_ms,
                    at=_iso(call.closed_at),
                    retime=retime,
                    speedup=speed,
                )
            )
        return out


def build_report(
    campaign_id: str,
    runs: Sequence[tuple[WorkflowRun, WorkflowHistory]],
    source: str,
) -> AuditReport:
    """The audit of one campaign from its runs' histories (campaign runs first)."""
    parsed = [parse_run(history, run.run_id) for run, history in runs]
    own = [p for p in parsed if p.workflow_id == campaign_id] or parsed[:1]
    by_child: dict[str, list[ParsedRun]] = defaultdict(list)
    for p in parsed:
        if p.workflow_id != own[0].workflow_id:
            by_child[p.workflow_id].append(p)
    targets = [_Target(wid, child_runs) for wid, child_runs in by_child.items()]

    inp = _model(CampaignInput, own[0].input)
    last = own[-1]
    outcome = _model(Outcome, last.result) if last.status == "completed" else None
    report = AuditReport(
        campaign_id=campaign_id,
        problem=inp.problem.name if inp else "",
        source=source,
        status=status_of(last.status, outcome),
        phase=str(last.search_attributes.get("KernelOptPhase") or ""),
        proposer=outcome.proposer if outcome else "",
        started_at=_iso(own[0].started_at),
        closed_at=_iso(last.closed_at),
        outcome=outcome,
        runs=[RunInfo.model_validate(p, from_attributes=True) for p in parsed],
    )
    _budgets(report, inp, own, targets, outcome)
    report.controls = _controls(parsed)
    report.incidents = _incidents(parsed)
    report.model_trials = _model_trials(own, outcome)
    report.targets = [_target_audit(t) for t in targets]
    report.candidates = _candidates(targets, report, outcome)
    report.checks = _checks(report, targets, outcome, own)
    return report


# --- budgets -----------------------------------------------------------------------------
def _budgets(
    report: AuditReport,
    inp: CampaignInput | None,
    own: list[ParsedRun],
    targets: list[_Target],
    outcome: Outcome | None,
) -> None:
    budgets = inp.options.budgets if inp else Budgets()
    report.budgets_initial = budgets
    for run in own:
        for msg in run.messages:
            if msg.kind == "update" and msg.name == "set_budgets":
                new = _model(Budgets, msg.result)
                if new is not None:
                    budgets = new
    report.budgets = budgets
    finished = sorted(
        (t for t in targets if t.result is not None), key=lambda t: t.runs[-1].closed_at
    )
    tokens, usd, gpu = 0, 0.0, 0.0
    for t in finished:
        tokens += t.result.usage.total_tokens
        usd += t.result.usage.usd
        gpu += t.result.gpu_seconds
        report.budget_timeline.append(
            BudgetPoint(
                at=_iso(t.runs[-1].closed_at),
                target_id=t.target_id,
                tokens=tokens,
                usd=usd,
                gpu_seconds=gpu,
            )
        )
    if outcome is not None:
        report.used = outcome.used
    else:  # a running campaign: its wall time so far, as its wall budget counts it
        last = max(
            (e for r in [*own, *(r for t in targets for r in t.runs)] if (e := r.last_event_at)),
            default=None,
        )
        wall = (last - own[0].started_at).total_seconds() if last else 0.0
        report.used = BudgetUse(tokens=tokens, usd=usd, gpu_seconds=gpu, wall_seconds=wall)


# --- events --------------------------------------------------------------------------------
def _controls(parsed: list[ParsedRun]) -> list[ControlEvent]:
    events = [
        ControlEvent(
            **_fields(m, "kind", "name", "args", "identity", "result"),
            at=_iso(m.at),
            workflow_id=p.workflow_id,
        )
        for p in parsed
        if p.workflow_type == names.OPTIMIZE_MODEL  # the user's own actions; searches
        for m in p.messages  # only receive copies the campaign forwards to them
    ]
    return sorted(events, key=lambda e: e.at)


def _incidents(parsed: list[ParsedRun]) -> list[Incident]:
    out = []
    for p in parsed:
        for a in p.activities:
            # a first attempt that merely waits for a worker is not an incident (the audit
            # says what it waits for); a retry waiting for a worker is one
            if a.attempt <= 1 and a.outcome in ("completed", "started", "scheduled"):
                continue
            if a.outcome == "scheduled" and p.status != "running":
                continue
            out.append(
                Incident(
                    at=_iso(a.scheduled_at),
                    workflow_id=p.workflow_id,
                    activity=a.activity_type,
                    activity_id=a.activity_id,
                    attempts=max(a.attempt, 1 if a.outcome != "scheduled" else 0),
                    outcome=a.outcome,
                    last_failure=a.failure or a.last_failure,
                )
            )
    return sorted(out, key=lambda i: i.at)


def _model_trials(own: list[ParsedRun], outcome: Outcome | None) -> list[ModelTrial]:
    stitched: dict[str, dict] = {}
    for run in own:
        for call in run.activities_named(names.RESTITCH):
            result = call.result if isinstance(call.result, dict) else {}
            wrapper = (result.get("wrapper") or {}).get("sha256")
            if wrapper and isinstance(call.input, dict):
                stitched[wrapper] = call.input
    replaced = set(outcome.replaced) if outcome else set()
    trials = []
    for run in own:
        for call in run.activities_named(names.GATE_MODEL):
            if not isinstance(call.input, dict):
                continue
            wrapper = call.input.get("wrapper") or {}
            reps = stitched.get(wrapper.get("sha256", ""), {}).get("replacements", [])
            target_ids = [r["target"]["id"] for r in reps]
            result = _model(ModelGateResult, call.result)
            verdicts = list(result.verdicts or [result.verdict]) if result else []
            passed = bool(result and result.verdict.passed)
            added = target_ids[-1] if target_ids else ""
            trials.append(
                ModelTrial(
                    index=len(trials),
                    targets=target_ids,
                    candidates=[r["source"]["sha256"][:12] for r in reps],
                    added=added,
                    wrapper=wrapper or None,
                    verdicts=verdicts,
                    passed=passed,
                    speedup=result.speedup if result else None,
                    category=result.category.value if result and result.category else "",
                    kept=passed and added in replaced,
                    at=_iso(call.closed_at),
                )
            )
    return trials


def _target_audit(t: _Target) -> TargetAudit:
    r = t.result
    return TargetAudit(
        target_id=t.target_id,
        workflow_id=t.workflow_id,
        runs=len(t.runs),
        status=t.runs[-1].status,
        proposer=r.proposer if r else "",
        candidates_tried=r.candidates_tried if r else len([d for d in t.decisions if not d.retime]),
        candidates_compiled=r.candidates_compiled if r else 0,
        best=r.best.id if r and r.best else None,
        best_kernel_speedup=r.best_kernel_speedup if r else None,
        stopped_reason=r.stopped_reason if r else "",
        tokens=r.usage.total_tokens if r else 0,
        usd=r.usage.usd if r else 0.0,
        gpu_seconds=r.gpu_seconds if r else 0.0,
        finished_at=_iso(t.runs[-1].closed_at) if r else "",
    )


# --- candidates --------------------------------------------------------------------------
def _prompts(cand_id: str, parent: str | None, iteration: int, ledger: dict) -> list[PromptRef]:
    keys = [f"{parent}/i{iteration}/plan", cand_id] if parent else [cand_id]
    out = []
    for key in keys:
        for entry in ledger.get(key, []):
            out.append(
                PromptRef(
                    **_fields(entry, "role", "call_id", "prompt", "reply", "usd"),
                    tokens=entry.prompt_tokens + entry.completion_tokens,
                )
            )
    return out


def _candidates(
    targets: list[_Target], report: AuditReport, outcome: Outcome | None
) -> list[CandidateAudit]:
    rows: list[CandidateAudit] = []
    for t in targets:
        ledger: dict[str, list[LedgerEntry]] = defaultdict(list)
        for entry in t.ledger:
            ledger[entry.call_id].append(entry)
        by_id: dict[str, CandidateAudit] = {}
        for d in t.decisions:
            c = d.candidate
            if d.retime and c.id in by_id:
                by_id[c.id].retime = RetimeAudit(ok=d.accepted, **_fields(d, *_DECISION_NUMBERS))
                continue
            row = CandidateAudit(
                **_fields(c, *_CANDIDATE_LINEAGE),
                **_fields(d, "screening", "deciding_gate", *_DECISION_NUMBERS),
                plan_direction=c.plan.direction if c.plan else "",
                plan_description=c.plan.description if c.plan else "",
                prompts=_prompts(c.id, c.parent_id, c.iteration, ledger),
                verdicts=list(d.verdicts),
                passed_gates_1_2=d.accepted,
                provisional=c.id in t.provisional_ids,
            )
            rows.append(row)
            by_id.setdefault(c.id, row)
        for row in by_id.values():
            row.final, row.final_reason = _final(row, t, report, outcome)
    # rows of duplicates stay in (the check counts them) but get the same final as the first
    for row in rows:
        if not row.final:
            row.final, row.final_reason = "duplicate", "a second decision for the same candidate"
    return rows


def _final(
    row: CandidateAudit, t: _Target, report: AuditReport, outcome: Outcome | None
) -> tuple[str, str]:
    running = report.status == "running"
    if not row.passed_gates_1_2 and row.deciding_gate == SCREENED_OUT:
        return "screened_out", row.reason  # the first tier only: no verdict exists
    if not row.passed_gates_1_2:
        return "rejected", f"{row.deciding_gate or 'rejected'}: {row.reason}"
    if row.retime is not None and not row.retime.ok:
        return "dropped", row.retime.reason
    best = t.result.best.id if t.result and t.result.best else None
    if t.result is None:
        return "pending", "its search is still running"
    if best != row.id:
        if best is None:
            return (
                "superseded",
                "passed gates 1-2, but no state of its target beat Inductor's kernel",
            )
        return "superseded", (
            f"passed gates 1-2 at {_speedup_text(row.speedup)}; the target's best is {best} "
            f"({_speedup_text(t.result.best_kernel_speedup)})"
        )
    trials = [m for m in report.model_trials if m.added == row.target_id]
    if outcome is not None and row.target_id in outcome.replaced:
        return "shipped", (
            f"best of {row.target_id} ({_speedup_text(t.result.best_kernel_speedup)} per kernel); the "
            f"verified model runs {_speedup_text(outcome.speedup)} vs torch.compile"
        )
    if trials:
        trial = trials[-1]
        if not trial.passed:
            failed = next((v for v in trial.verdicts if not v.passed), None)
            what = f"{failed.gate.value}: {failed.reason}" if failed else "the model gates"
            return "not_kept", f"re-stitched model failed {what}"
        return "not_kept", (
            f"re-stitched model passed ({_speedup_text(trial.speedup)}) but was not faster than "
            "the model without it"
        )
    if running:
        return "pending", "best of its target; model-level verification not done yet"
    reason = outcome.reason if outcome else report.status
    return "unverified", f"best of its target, never re-stitched: {reason}"


def _speedup_text(value: float | None) -> str:
    """A speedup as the audit prints it, "1.234x" ("-" when there is none)."""
    return "-" if value is None else f"{value:.3f}x"


# --- checks --------------------------------------------------------------------------------
def _checks(
    report: AuditReport, targets: list[_Target], outcome: Outcome | None, own: list[ParsedRun]
) -> list[AuditCheck]:
    checks: list[AuditCheck] = []
    ids = Counter((c.target_id, c.id) for c in report.candidates)
    twice = sorted(f"{t}/{i}" for (t, i), n in ids.items() if n > 1)
    checks.append(
        AuditCheck(
            name="one decision per candidate",
            ok=not twice,
            detail=f"{len(ids)} candidates" + (f"; decided twice: {twice[:5]}" if twice else ""),
        )
    )
    gate_calls: Counter = Counter()
    in_flight: set[str] = set()  # scheduled, not closed yet: a running campaign's, not lost
    for t in targets:
        for run in t.runs:
            for call in run.activities_named(names.GATE_CANDIDATE):
                if isinstance(call.input, dict):
                    gate_calls[str(call.input.get("candidate_id"))] += 1
                    if call.outcome == "scheduled":
                        in_flight.add(str(call.input.get("candidate_id")))
    gated_twice = sorted(k for k, n in gate_calls.items() if n > 1)
    checks.append(
        AuditCheck(
            name="one gate call per candidate",
            ok=not gated_twice,
            detail=f"{sum(gate_calls.values())} gate_candidate calls"
            + (f"; sent twice: {gated_twice[:5]}" if gated_twice else ""),
        )
    )
    decided = {c.id for c in report.candidates}
    lost = sorted(
        k
        for k in gate_calls
        if k.removesuffix(RETIME_SUFFIX) not in decided and gate_calls[k] and k not in in_flight
    )
    pending = f"{len(in_flight)} being gated now" if in_flight else ""
    checks.append(
        AuditCheck(
            name="every gated candidate decided",
            ok=not lost,
            detail="; ".join(
                x for x in (pending, f"gated without a decision: {lost[:5]}" if lost else "") if x
            ),
        )
    )
    for t in targets:
        if t.result is None:
            continue
        n = len([d for d in t.decisions if not d.retime])  # archived pages included
        if n != t.result.candidates_tried:
            checks.append(
                AuditCheck(
                    name=f"tried count of {t.target_id}",
                    ok=False,
                    detail=f"{t.result.candidates_tried} tried but {n} decisions",
                )
            )
    if outcome is not None:
        results = _campaign_results(own)
        tried = sum(r.candidates_tried for r in results)
        checks.append(
            AuditCheck(
                name="campaign tried count",
                ok=outcome.candidates_tried == tried == len(report.candidates),
                detail=f"outcome {outcome.candidates_tried}, searches {tried}, "
                f"audit rows {len(report.candidates)}",
            )
        )
        accepted = sum(1 for c in report.candidates if c.passed_gates_1_2)
        checks.append(
            AuditCheck(
                name="campaign accepted count",
                ok=outcome.candidates_accepted == accepted,
                detail=f"outcome {outcome.candidates_accepted}, candidates that passed gates 1-2 "
                f"{accepted}",
            )
        )
        tokens = sum(r.usage.total_tokens for r in results)
        usd = sum(r.usage.usd for r in results)
        gpu = sum(r.gpu_seconds for r in results)
        ok = (
            outcome.used.tokens == tokens
            and abs(outcome.used.usd - usd) < 1e-9
            and outcome.used.gpu_seconds + 1e-6 >= gpu
        )
        checks.append(
            AuditCheck(
                name="budget use adds up",
                ok=ok,
                detail=f"tokens {outcome.used.tokens} vs searches {tokens}; usd "
                f"{outcome.used.usd:.4f} vs {usd:.4f}; GPU-s {outcome.used.gpu_seconds:.1f} "
                f">= searches {gpu:.1f}",
            )
        )
    broken = [
        p.run_id
        for chain in [own, *[t.runs for t in targets]]
        for p in chain[:-1]
        if p.status != "continued_as_new"
    ]
    checks.append(
        AuditCheck(
            name="run chains intact",
            ok=not broken,
            detail=f"{len(own)} campaign run(s), "
            f"{sum(len(t.runs) for t in targets)} search run(s)"
            + (f"; closed mid-chain: {broken}" if broken else ""),
        )
    )
    return checks


def _campaign_results(own: list[ParsedRun]) -> list[SearchKernelResult]:
    """The search results the campaign recorded (one per completed child)."""
    out = []
    for run in own:
        for child in run.children:
            if child.workflow_type != names.SEARCH_KERNEL or child.outcome != "completed":
                continue
            result = _model(SearchKernelResult, child.result)
            if result is not None:
                out.append(result)
    return out


__all__ = ["build_report"]
