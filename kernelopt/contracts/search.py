"""The kernel search: proposals, candidates, agents' I/O and the search's result."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import ArtifactRef, Contract, Frozen
from .compiled import CompileResult, SearchTarget, SegmentResult
from .verdicts import GateVerdict


class SearchParams(Frozen):
    """SPEC.md section 4 defaults: T iterations, N plans, K retries, beam B."""

    iterations: int = Field(5, ge=1)
    plans: int = Field(4, ge=1)
    retries: int = Field(4, ge=0)
    beam: int = Field(4, ge=1)
    ucb_c: float = 1.4
    meltdown_window: int = 6
    meltdown_distinct: int = 2
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])


class ProposerKind(StrEnum):
    AUTO = "auto"  # LLM when an endpoint is configured, built-in otherwise
    LLM = "llm"
    BUILTIN = "builtin"


class ProposerConfig(Frozen):
    """How to reach the LLM.  The key itself never enters history: only its env var name."""

    kind: ProposerKind = ProposerKind.AUTO
    base_url: str | None = None
    model: str = "gpt-4o"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    max_output_tokens: int = 8192
    usd_per_mtok_in: float = 0.0
    usd_per_mtok_out: float = 0.0
    request_timeout_s: float = 600.0


class Usage(Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Bottleneck(StrEnum):
    NEAR_OPTIMAL = "near_optimal"
    MEMORY_BOUND = "memory_bound"
    COMPUTE_BOUND = "compute_bound"
    UNDERUTILIZED = "underutilized"


class ProfileInput(Frozen):
    compiled: CompileResult
    segment: SegmentResult
    target: SearchTarget
    source: ArtifactRef  # the kernel state to profile


class KernelProfile(Frozen):
    """Distilled Nsight Compute profile (SPEC.md section 3), never the raw report."""

    source: str  # "ncu" or "events" when ncu is unavailable
    note: str = ""
    duration_us: float | None = None
    sol_compute_pct: float | None = None
    sol_memory_pct: float | None = None
    registers_per_thread: int | None = None
    spills: int | None = None
    achieved_occupancy_pct: float | None = None
    top_rules: list[str] = Field(default_factory=list)
    raw_report: ArtifactRef | None = None


class Analysis(Frozen):
    bottleneck: Bottleneck
    reasoning: str
    advice: str = ""


class ProfileResult(Frozen):
    profile: KernelProfile
    analysis: Analysis


class Plan(Frozen):
    direction: str  # short label used by the meltdown detector, e.g. "vectorize-loads"
    description: str


class PlanInput(Frozen):
    target: SearchTarget
    state_source: ArtifactRef
    profile: ProfileResult | None = None
    experience: str = ""  # retrieved memory, already bounded
    banned_directions: list[str] = Field(default_factory=list)
    plans: int = 4
    proposer: ProposerConfig
    campaign_id: str = ""


class PlanResult(Frozen):
    plans: list[Plan]
    usage: Usage = Usage()
    prompt: ArtifactRef | None = None
    reply: ArtifactRef | None = None


class ExecuteInput(Frozen):
    """Write a kernel for a plan; with ``conversation`` + ``feedback`` it is a retry-fix."""

    target: SearchTarget
    state_source: ArtifactRef
    plan: Plan
    contract: str = ""  # the launch contract the candidate must honour, as text
    conversation: ArtifactRef | None = None
    feedback: str = ""
    proposer: ProposerConfig
    campaign_id: str = ""


class ExecuteResult(Frozen):
    source: ArtifactRef | None  # None when the reply held no usable code
    conversation: ArtifactRef
    usage: Usage = Usage()
    error: str = ""  # malformed reply etc., fed back on the next retry


class Experience(Frozen):
    situation: str
    action: str
    effect: str = ""
    tags: list[str] = Field(default_factory=list)


class SummarizeInput(Frozen):
    target: SearchTarget
    outcomes: list[str]  # one line per candidate of the iteration
    proposer: ProposerConfig
    campaign_id: str = ""


class SummarizeResult(Frozen):
    entries: list[Experience]
    usage: Usage = Usage()


class BuiltinProposeInput(Frozen):
    compiled: CompileResult
    segment: SegmentResult
    target: SearchTarget
    state_source: ArtifactRef
    count: int = 4
    exclude: list[str] = Field(default_factory=list)  # variant labels already tried
    iteration: int = 0


class BuiltinVariant(Frozen):
    label: str
    source: ArtifactRef


class BuiltinProposeResult(Frozen):
    variants: list[BuiltinVariant]


class Candidate(Frozen):
    id: str
    target_id: str
    parent_id: str | None
    iteration: int
    source: ArtifactRef | None
    plan: Plan | None = None
    proposer: str = ""  # "llm:<model>" or "builtin"
    attempt: int = 0  # retry-fix attempt that produced it
    conversation: ArtifactRef | None = None


class Decision(Frozen):
    """One accept/reject decision with its evidence: the unit of the audit trail."""

    candidate: Candidate
    accepted: bool
    deciding_gate: str = ""
    reason: str
    verdicts: list[GateVerdict] = Field(default_factory=list)
    kernel_ms: float | None = None
    baseline_kernel_ms: float | None = None
    at: str = ""  # workflow time, ISO


class SearchKernelInput(Contract):
    campaign_id: str
    compiled: CompileResult
    segment: SegmentResult
    target: SearchTarget
    params: SearchParams = SearchParams()
    proposer: ProposerConfig = ProposerConfig()
    use_llm: bool = False
    gpu_queue: str
    cpu_queue: str
    budget_left: dict[str, float | None] = Field(default_factory=dict)
    state: dict[str, Any] | None = None  # carried across continue-as-new


class SearchKernelResult(Frozen):
    target_id: str
    best: Candidate | None = None
    best_kernel_speedup: float | None = None
    decisions: list[Decision] = Field(default_factory=list)
    candidates_tried: int = 0
    candidates_compiled: int = 0
    usage: Usage = Usage()
    gpu_seconds: float = 0.0
    stopped_reason: str = ""
    experience: list[Experience] = Field(default_factory=list)
