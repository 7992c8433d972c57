"""A campaign: one problem, optimised end to end, with budgets, progress and outcome."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import Field

from .base import ArtifactRef, Contract, Frozen
from .compiled import (
    CompileResult,
    ScopeRef,
    SearchMode,
    SearchTarget,
    SegmentRef,
    SegmentResult,
    TargetPlan,
    TriageRef,
    TriageResult,
)
from .problem import ProblemKind, ProblemSpec
from .search import (
    Decision,
    PromptFacts,
    ProposerConfig,
    SearchKernelResult,
    SearchParams,
    Usage,
)
from .verdicts import GateSettings, GateVerdict


class Budgets(Contract):
    """Hard limits; ``None`` means unlimited.  Adjustable while the campaign runs."""

    max_tokens: int | None = None
    max_usd: float | None = None
    max_gpu_seconds: float | None = None
    max_wall_seconds: float | None = None


class BudgetUse(Contract):
    tokens: int = 0
    usd: float = 0.0
    gpu_seconds: float = 0.0
    wall_seconds: float = 0.0

    def add(self, usage: Usage, gpu_seconds: float = 0.0) -> None:
        self.tokens += usage.total_tokens
        self.usd += usage.usd
        self.gpu_seconds += gpu_seconds

    def exceeded(self, budgets: Budgets) -> str | None:
        """The first budget this use exceeds, by name, or None."""
        checks = [
            ("tokens", self.tokens, budgets.max_tokens),
            ("usd", self.usd, budgets.max_usd),
            ("gpu_seconds", self.gpu_seconds, budgets.max_gpu_seconds),
            ("wall_seconds", self.wall_seconds, budgets.max_wall_seconds),
        ]
        for name, used, limit in checks:
            if limit is not None and used >= limit:
                return name
        return None


class CampaignOptions(Frozen):
    mode: SearchMode = SearchMode.AUTO
    search: SearchParams = SearchParams()
    proposer: ProposerConfig = ProposerConfig()
    budgets: Budgets = Budgets()
    gamma: float = 1.03
    # GPU activities' heartbeat timeout: how soon a dead GPU worker is noticed (None: 120 s).
    # At least twice the 5 s at which supervised GPU children heartbeat, or live work times out.
    gpu_heartbeat_s: float | None = Field(default=None, ge=10)
    search_library_dominated: bool = False
    compile_mode: str = "max-autotune-no-cudagraphs"
    cpu_queue: str = "kernelopt-cpu"
    gpu_queue: str = "kernelopt-gpu"
    max_targets: int | None = None
    share_memory: bool = False  # opt-in: experience memory shared across campaigns
    # Gate settings pinned when the campaign is submitted (``start_campaign`` fills them):
    # a campaign keeps the settings it started with when a later release changes the
    # defaults.  None (campaigns from before pinning): each gate takes today's defaults.
    gates: GateSettings | None = None


class CampaignInput(Contract):
    campaign_id: str
    problem: ProblemSpec
    options: CampaignOptions = CampaignOptions()
    state: CampaignState | None = None  # set when continuing as new


class CampaignPhase(StrEnum):
    QUEUED = "queued"
    COMPILING = "compiling"
    SEGMENTING = "segmenting"
    TRIAGING = "triaging"
    SEARCHING = "searching"
    RESTITCHING = "restitching"
    VERIFYING = "verifying"
    REPORTING = "reporting"
    DONE = "done"
    CANCELLED = "cancelled"


class CampaignProgress(Contract):
    """What `kernelopt optimize` and `kernelopt show` display (a query's answer)."""

    campaign_id: str
    problem: str
    phase: CampaignPhase = CampaignPhase.QUEUED
    current_target: str | None = None
    targets_total: int = 0
    targets_done: int = 0
    candidates_tried: int = 0
    candidates_accepted: int = 0
    best_speedup: float | None = None
    budgets: Budgets = Budgets()
    used: BudgetUse = BudgetUse()
    paused: bool = False
    proposer: str = ""
    waiting_on: str | None = None  # activity queue the campaign is blocked on, if any
    message: str = ""


class OutcomeCategory(StrEnum):
    OPTIMIZED = "optimized"
    MATCHED = "matched"
    SYNTHESIS_FAILURE = "synthesis_failure"
    FALLBACK = "fallback"


class Outcome(Frozen):
    campaign_id: str
    problem: str
    category: OutcomeCategory
    speedup: float  # over the compiled baseline; 1.0 whenever the baseline is returned
    reason: str
    baseline_ms: float | None = None
    optimized_ms: float | None = None
    eager_ms: float | None = None
    compile_mode: str = ""
    # what the baseline is and how it was chosen (a kernel problem's Helion autotuning budget)
    baseline_note: str = ""
    kind: ProblemKind = ProblemKind.MODULE
    proposer: str = ""
    mode: SearchMode | None = None
    mode_reason: str = ""
    # the full triage (outcomes from before "triage-by-reference") or its reference;
    # the report loads the full one by reference for its per-target table
    triage: TriageResult | None = None
    triage_ref: TriageRef | None = None
    wrapper: ArtifactRef | None = None  # the model we hand back (baseline or re-stitched)
    # "wrapper": ``wrapper`` is a wrapper module (``call(args)``); "forward": it is the
    # problem file with a ``ModelNew`` (a whole-forward win), judged in that form
    source_kind: str = "wrapper"
    replaced: list[str] = Field(default_factory=list)
    # per replaced target, the family of the candidate that replaced it (the built-in
    # label's family, ``search.builtin_family``, or "llm"); empty in older outcomes
    replaced_by: list[str] = Field(default_factory=list)
    model_verdicts: list[GateVerdict] = Field(default_factory=list)
    # the candidate each model verdict judged (with the ones kept before it); empty in
    # outcomes from before a target's runners-up could be tried
    model_trials: list[str] = Field(default_factory=list)
    report: ArtifactRef | None = None
    used: BudgetUse = BudgetUse()
    candidates_tried: int = 0
    candidates_accepted: int = 0
    torch_version: str = ""
    triton_version: str = ""
    gpu_name: str = ""
    numerics: str = ""  # the compile's kernelopt.precision.POLICY ("": not recorded then)
    stop_reason: str = ""  # why the search ended early (a budget, a cancel), if it did
    # the opt-in library choices the returned model makes (library_choices_of the kept
    # candidates' labels): they change f, and a deployment reproduces them from here
    library_choices: list[str] = Field(default_factory=list)
    # why the built-in plan searched no single kernel (TargetPlan.kernels_short); "" when
    # it searched them, or when the campaign predates the record
    kernels_short: str = ""

    def returned_form(self) -> str:
        """In which form the returned model comes (the form gate 4 timed); "" without one."""
        if self.wrapper is None:
            return ""
        if self.source_kind == "forward":
            return "the problem file with `ModelNew` (a whole-forward win)"
        # Inductor's (re-stitched) wrapper, or a kernel problem's baseline wrapper
        return "a wrapper module: `call(args)` on the captured argument list"

    def replaced_text(self) -> str:
        """The replaced targets, each with its candidate's family where the outcome has it."""
        if len(self.replaced_by) != len(self.replaced):
            return ", ".join(self.replaced)
        return ", ".join(f"{t} ({f})" for t, f in zip(self.replaced, self.replaced_by, strict=True))


LIBRARY_PREFIX = "library:"


def library_choices_of(labels: Iterable[str]) -> list[str]:
    """The library choices behind built-in labels (``library:a+b`` -> ``library:a``, ``library:b``).

    Pure and stdlib-only, so the campaign workflow can fill ``Outcome.library_choices``
    from the labels of the candidates it kept.
    """
    found: dict[str, None] = {}
    for label in labels:
        if label.startswith(LIBRARY_PREFIX):
            for choice in label[len(LIBRARY_PREFIX) :].split("+"):
                if choice:
                    found[LIBRARY_PREFIX + choice] = None
    return list(found)


class CampaignState(Contract):
    """Everything the workflow must carry across continue-as-new and restarts."""

    phase: CampaignPhase = CampaignPhase.QUEUED
    used: BudgetUse = BudgetUse()
    budgets: Budgets = Budgets()
    started_at: str = ""  # workflow time of the first run, ISO
    compiled: CompileResult | None = None
    # the segmentation itself (campaigns from before "segmentation-by-reference") or,
    # since then, its reference: the whole of it is megabytes at hundreds of kernels
    segment: SegmentResult | None = None
    segment_ref: SegmentRef | None = None
    # triage itself (campaigns from before "triage-by-reference") or its reference, and
    # then the searched targets as a stored plan instead of ``targets``: both grew
    # with the model (hundreds of KB at hundreds of kernels, mostly signatures)
    triage: TriageResult | None = None
    triage_ref: TriageRef | None = None
    targets: list[SearchTarget] = Field(default_factory=list)  # what the search covers
    plan: TargetPlan | None = None
    memory: ArtifactRef | None = None  # experience memory, carried from search to search
    results: list[SearchKernelResult] = Field(default_factory=list)
    candidates_tried: int = 0
    candidates_accepted: int = 0
    best_speedup: float | None = None
    stop_reason: str = ""
    paused: bool = False
    stop_requested: str = ""


class TargetScopeInput(Frozen):
    """The plan's ``index``-th target, ready to search: what a by-reference campaign asks."""

    compiled: CompileResult
    segment: SegmentRef
    triage: TriageRef
    plan: TargetPlan
    index: int = Field(ge=0)
    gates: GateSettings | None = None  # the campaign's pinned settings, for the facts' gamma
    # store the scope and hand back its reference (campaigns since "scope-by-reference");
    # False, the default, is what inputs scheduled before the field existed meant
    by_reference: bool = False


class TargetScope(Frozen):
    """A target, its part of the segmentation, and its prompt facts (None: not computable).

    Asked ``by_reference``, the scoped segmentation and the full facts stay in the
    store (``scope`` names them) and ``facts`` lists only the slowest kernels.
    """

    target: SearchTarget
    segment: SegmentResult | None = None
    facts: PromptFacts | None = None
    scope: ScopeRef | None = None


class ReportInput(Frozen):
    outcome: Outcome
    decisions: list[Decision] = Field(default_factory=list)
    log_pages: list[ArtifactRef] = Field(default_factory=list)  # archived decisions, first


class ReportResult(Frozen):
    report: ArtifactRef
    summary: ArtifactRef | None = None


class ExportInput(Frozen):
    campaign_id: str
    workflow_id: str
    run_id: str | None = None


class ExportResult(Frozen):
    history: ArtifactRef


CampaignInput.model_rebuild()
