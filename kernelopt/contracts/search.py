"""The kernel search: proposals, candidates, agents' I/O and the search's result."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import ArtifactRef, Contract, DeviceTimed, Frozen
from .compiled import CompileResult, ScopeRef, SearchStepInput, SearchTarget, SegmentResult
from .screening import ScreeningEstimate, ScreenParams
from .verdicts import GateSettings, GateVerdict


class SearchParams(Frozen):
    """The method's defaults (docs/method.md, "Search"): T iterations, N plans, K retries, beam B."""

    iterations: int = Field(5, ge=1)
    plans: int = Field(4, ge=1)
    retries: int = Field(4, ge=0)
    beam: int = Field(4, ge=1)
    ucb_c: float = 1.4
    meltdown_window: int = 6
    meltdown_distinct: int = 2
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    # two tiers: screen a round's candidates cheaply, gate only those that could matter
    screen: ScreenParams = ScreenParams()


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
    # how replies arrive (kernelopt.agents.deferred): "sync" (HTTP), "batch" or "folder"
    mode: str = "sync"
    poll_s: float = 60.0  # batch / folder: longest pause between checks
    wait_limit_s: float = 86400.0  # batch / folder: unanswered this long ends the search


class Usage(Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    calls: int = 0  # LLM requests behind these numbers (0 for hand-built usages)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages (frozen models: returns a new one)."""
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            usd=self.usd + other.usd,
            calls=self.calls + other.calls,
        )


class Bottleneck(StrEnum):
    NEAR_OPTIMAL = "near_optimal"
    MEMORY_BOUND = "memory_bound"
    COMPUTE_BOUND = "compute_bound"
    UNDERUTILIZED = "underutilized"
    UNKNOWN = "unknown"  # no counters (no ncu, no permission, no harness): nothing to classify


class ProfileInput(SearchStepInput):
    source: ArtifactRef  # the kernel state to profile
    harness: ArtifactRef | None = None  # a standalone harness script (get_args() + call(args))
    kernel_regex: str = ""  # ncu -k filter; defaults to the target's (dominant) kernel
    # kernel name -> GPU ms per forward (triage); picks a whole-model target's dominant kernel
    kernel_times: dict[str, float] = Field(default_factory=dict)
    state_id: str = ""
    use_ncu: bool = True
    timeout_s: float = 600.0


class KernelProfile(Frozen):
    """Distilled Nsight Compute profile (docs/method.md, "Agents"), never the raw report."""

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
    kernel: str = ""  # the kernel these numbers are of ("" when not known)
    kernel_note: str = ""  # why that kernel (e.g. "dominant: 71% of the forward")


class Analysis(Frozen):
    bottleneck: Bottleneck
    reasoning: str
    advice: str = ""


class Hardware(Frozen):
    """The GPU the candidate will run on, as the prompts state it.

    ``source`` says where the numbers come from: "device" when the GPU worker
    read them from CUDA, "stand-in: ..." when they were reconstructed on a CPU
    machine (compile record, Inductor's DeviceProperties, the roofline table).
    """

    name: str
    sm_count: int | None = None
    bandwidth_gbs: float | None = None  # HBM bandwidth (device) or measured copy bandwidth
    l2_bytes: int | None = None
    compute_capability: str = ""
    source: str = ""
    # the software the GPU worker runs candidates with (None: not read, as in older payloads)
    torch_version: str | None = None
    triton_version: str | None = None


class ProfileResult(DeviceTimed):
    profile: KernelProfile
    analysis: Analysis
    gpu_seconds: float = 0.0
    hardware: Hardware | None = None  # read on the GPU worker that profiled
    # set for a prompt (never by the profiler) when this state could not be profiled:
    # the root state's last good profile, shown as the baseline's instead of no numbers
    baseline: ProfileResult | None = None


# the most Inductor kernels a search's prompt facts list (``PromptFacts.bounded``): a
# role's whole request is 6000-9500 tokens (agents/budget.py), which the prompt's
# Inductor section, cut to fit, fills with fewer trimmed kernel sources than this
FACT_KERNELS = 32


class InductorKernelFact(Frozen):
    """One of Inductor's kernels, for a whole-model target's prompt (the code to beat)."""

    name: str
    source: ArtifactRef | None = None
    ms: float | None = None  # GPU time per forward (triage), None when not measured
    launch: str = ""  # the launch statement in the wrapper
    grid: str = ""


class PromptFacts(Frozen):
    """What the agents are told about the target beyond its source (issue 29, point 1).

    Built from contracts only (``kernelopt.agents.facts.build_facts``) so a
    workflow can build it without I/O; the roles load the referenced sources.
    """

    hardware: Hardware | None = None
    baseline_ms: float | None = None  # the target's GPU time per forward
    baseline_note: str = ""  # where baseline_ms comes from
    forward_ms: float | None = None  # the whole forward's GPU time
    # the forward as gate 4 times it (called from Python, launch and host time included),
    # set when it is well above forward_ms; share and required_speedup are then against it
    dispatched_ms: float | None = None
    share: float | None = None  # the target's fraction of the forward
    gamma: float = 1.03
    required_speedup: float | None = None  # target speedup for the forward to gain gamma
    required_note: str = ""
    bytes_in: int | None = None
    bytes_out: int | None = None
    bytes_note: str = ""
    launches: list[str] = Field(default_factory=list)  # launch statement(s) with line numbers
    grid: str = ""
    rtol: float = 1e-3
    atol: float = 1e-3
    model_tolerance: float = 1e-4
    rho_max: float = 10.0
    inductor_kernels: list[InductorKernelFact] = Field(default_factory=list)  # slowest first
    dominant_kernel: str = ""  # the slowest of them by measured time, when measured
    # how many of Inductor's kernels ``bounded`` left out of ``inductor_kernels`` (the
    # fastest ones); the stored scope of a by-reference search keeps them all
    inductor_kernels_left_out: int = 0
    # the compile record's software, read on the GPU worker that compiled the baseline
    torch_version: str | None = None
    triton_version: str | None = None
    # one line per target kernel: the launch config Inductor chose (or that it is unknown)
    launch_configs: list[str] = Field(default_factory=list)
    # the target's producer and consumer in the forward's launch order, one line each
    neighbours: list[str] = Field(default_factory=list)

    def bounded(self, limit: int = FACT_KERNELS) -> PromptFacts:
        """These facts with only the ``limit`` slowest Inductor kernels listed.

        A whole-forward target lists every kernel, which made the facts -- carried in
        the search's input and every LLM role's -- grow with the model; the prompt's
        Inductor section is cut to the role's token budget long before a few hundred.
        """
        if len(self.inductor_kernels) <= limit:
            return self
        return self.model_copy(
            update={
                "inductor_kernels": self.inductor_kernels[:limit],
                "inductor_kernels_left_out": len(self.inductor_kernels) - limit,
            }
        )

    @property
    def bytes_floor(self) -> int | None:
        if self.bytes_in is None and self.bytes_out is None:
            return None
        return (self.bytes_in or 0) + (self.bytes_out or 0)


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
    # the planner activity retrieves from these when ``experience`` is empty
    memory: ArtifactRef | None = None
    memory_tags: list[str] = Field(default_factory=list)
    share_memory: bool = False  # also read the cross-campaign store under $KERNELOPT_HOME
    memory_max_tokens: int = 400
    state_id: str = ""
    state_speedup: float | None = None
    iteration: int = 0
    facts: PromptFacts | None = None  # the target's numbers (agents.facts.build_facts)
    tried_plans: list[Plan] = Field(default_factory=list)  # earlier plans on this state
    # the planner's one retry after an unparseable reply: that reply and why it failed
    parse_retry: ArtifactRef | None = None
    parse_error: str = ""


class PlanResult(Frozen):
    plans: list[Plan]
    usage: Usage = Usage()
    prompt: ArtifactRef | None = None
    reply: ArtifactRef | None = None
    error: str = ""  # the reply could not be used (malformed, all directions banned)
    # the planner's reason for proposing nothing (no plan can reach the required speedup)
    declined: str = ""


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
    candidate_id: str = ""
    attempt: int = 0
    profile: ProfileResult | None = None
    entry_points: list[str] = Field(default_factory=list)  # names a usable reply must define
    verdicts: list[GateVerdict] = Field(default_factory=list)  # the rejection to fix (retry-fix)
    facts: PromptFacts | None = None  # the target's numbers (agents.facts.build_facts)
    # the executor's memory: retrieved like the planner's when ``experience`` is empty
    experience: str = ""
    memory: ArtifactRef | None = None
    memory_tags: list[str] = Field(default_factory=list)
    memory_max_tokens: int = 300
    siblings: list[str] = Field(default_factory=list)  # sibling outcomes (feedback.sibling_lines)
    timing: str = ""  # retry after timing: agents.result_text.timing_feedback's text


class ExecuteResult(Frozen):
    source: ArtifactRef | None  # None when the reply held no usable code
    conversation: ArtifactRef
    usage: Usage = Usage()
    error: str = ""  # malformed reply etc., fed back on the next retry
    reply: ArtifactRef | None = None


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
    use_llm: bool = True  # False: distil mechanically (built-in proposer), no LLM call
    tags: list[str] = Field(default_factory=list)  # situation tags the entries inherit
    memory: ArtifactRef | None = None  # campaign memory to update
    share_memory: bool = False  # also write the cross-campaign store under $KERNELOPT_HOME
    iteration: int = 0
    decisions: list[Decision] = Field(default_factory=list)  # the iteration's decisions


class SummarizeResult(Frozen):
    entries: list[Experience]
    usage: Usage = Usage()
    memory: ArtifactRef | None = None  # the updated campaign memory
    prompt: ArtifactRef | None = None
    reply: ArtifactRef | None = None
    error: str = ""


class BuiltinProposeInput(SearchStepInput):
    state_source: ArtifactRef
    count: int = 4
    exclude: list[str] = Field(default_factory=list)  # variant labels already tried
    iteration: int = 0
    # the campaign's experience memory and this target's situation tags: which family won
    # on kernels like this one before (kernelopt.proposer.knowledge); None: no lessons
    memory: ArtifactRef | None = None
    memory_tags: list[str] = Field(default_factory=list)


# the built-in proposer's families, named by a label's prefix ("regen:...", "template:...");
# a launch config's label has none
BUILTIN_FAMILIES = ("template", "rewrite", "regen", "library")
LAUNCH_FAMILY = "launch-config"


def builtin_family(label: str) -> str:
    """The family a built-in variant's label belongs to."""
    head = label.split(":", 1)[0]
    return head if head in BUILTIN_FAMILIES else LAUNCH_FAMILY


class BuiltinVariant(Frozen):
    label: str
    source: ArtifactRef
    config: dict[str, Any] = Field(default_factory=dict)  # the launch config it pins
    description: str = ""

    @property
    def family(self) -> str:
        return builtin_family(self.label)


class BuiltinProposeResult(DeviceTimed):
    variants: list[BuiltinVariant]
    kernel_kind: str = ""  # pointwise / reduction / persistent_reduction / fixed_config
    note: str = ""  # why fewer variants than asked (unsupported heuristic, space exhausted)


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
    label: str = ""  # built-in variant label (launch config), empty for LLM candidates
    # the speedup over Inductor of the state it was built on, when that is not Inductor's
    # own code: its feedback compares with it, not only with Inductor
    parent_speedup: float | None = None


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
    retime: bool = False  # a winner's re-timing before it seeds the next round
    speedup: float | None = None  # baseline_kernel_ms / kernel_ms
    # gate 4's numbers the feedback quotes (result_text.timing_summary): the forward's
    # decision with its noise and interval, the CUDA-graph and GPU-event times
    timing: dict[str, Any] = Field(default_factory=dict)
    # the first tier's untrusted estimate (two-tier search); never read as a result
    screening: ScreeningEstimate | None = None


def passed_gates_1_2(decisions: list[Decision]) -> int:
    """Candidates that passed gates 1-2 (a winner's re-timing is not another candidate)."""
    return sum(1 for d in decisions if d.accepted and not d.retime)


class LedgerEntry(Frozen):
    """One LLM call: who asked, what it cost, where prompt and reply are."""

    role: str  # planner / executor / retry_fix / summarizer
    call_id: str  # deterministic: derived from the candidate / state / iteration
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    prompt: ArtifactRef | None = None
    reply: ArtifactRef | None = None
    at: str = ""


# signal and query names of the SearchKernel workflow
SEARCH_UPDATE_BUDGET = "update_budget"
SEARCH_PROGRESS = "progress"
BUDGET_KEYS = ("tokens", "usd", "gpu_seconds", "wall_seconds")


class SearchBudgetUpdate(Frozen):
    """New allowances for a running search (same keys and meaning as ``budget_left``).

    Keys present replace the current allowance (``None`` = unlimited); keys absent
    are left as they are.  Allowances count from the start of the search.
    """

    budget_left: dict[str, float | None] = Field(default_factory=dict)


class SearchProgress(Frozen):
    target_id: str
    proposer: str = ""
    iteration: int = 0
    iterations: int = 0
    candidates_tried: int = 0
    candidates_accepted: int = 0
    best_kernel_speedup: float | None = None
    usage: Usage = Usage()
    gpu_seconds: float = 0.0
    budget_left: dict[str, float | None] = Field(default_factory=dict)
    stopped_reason: str = ""
    step: str = ""


class SearchKernelInput(Contract):
    campaign_id: str
    compiled: CompileResult
    # the scoped segmentation inline, or (searches since "scope-by-reference") its
    # reference: the activity loads it before anything reads ``segment``
    segment: SegmentResult | None = None
    scope: ScopeRef | None = None
    target: SearchTarget
    params: SearchParams = SearchParams()
    proposer: ProposerConfig = ProposerConfig()
    use_llm: bool = False
    gpu_queue: str
    cpu_queue: str
    gpu_heartbeat_s: float | None = None  # the campaign's GPU heartbeat timeout
    gates: GateSettings | None = None  # the campaign's pinned gate settings (None: defaults)
    budget_left: dict[str, float | None] = Field(default_factory=dict)
    state: dict[str, Any] | None = None  # carried across continue-as-new
    memory: ArtifactRef | None = None  # campaign experience memory so far
    share_memory: bool = False  # read/write the cross-campaign memory under $KERNELOPT_HOME
    harness: ArtifactRef | None = None  # standalone harness for profiling, if the caller has one
    gate_timeout_s: float = 300.0
    profile_children: bool = True  # profile every beam state before planning on it (LLM mode)
    facts: PromptFacts | None = None  # prompt facts (the campaign builds them with its triage)


class SearchLogPage(Frozen):
    """Decisions and ledger entries moved out of a search's carried state, in order.

    Passed whole to ``archive_search_log`` (so the history keeps them for the
    audit) and stored as one artifact (so the report finds them).
    """

    campaign_id: str
    target_id: str
    decisions: list[Decision] = Field(default_factory=list)
    ledger: list[LedgerEntry] = Field(default_factory=list)
    # an index page: the search's pages in order (its result then names this page only)
    pages: list[ArtifactRef] = Field(default_factory=list)


# how a built-in search's stop reason starts when no family had anything left to offer
BUILTIN_EXHAUSTED = "built-in proposer has nothing left to try: "


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
    proposer: str = ""  # plainly which proposer ran: "llm:<model> @ <url>" or "builtin: ..."
    best_kernel_ms: float | None = None
    baseline_kernel_ms: float | None = None
    root_profile: ProfileResult | None = None
    memory: ArtifactRef | None = None  # the updated campaign memory
    ledger: list[LedgerEntry] = Field(default_factory=list)
    iterations_done: int = 0
    # earlier decisions and ledger entries, archived (``decisions``/``ledger`` hold the rest)
    log_pages: list[ArtifactRef] = Field(default_factory=list)
    candidates_accepted: int | None = None  # None in results from before the archive
    # the next re-timed winners after ``best``, best first: tried on the whole model when
    # ``best`` fails the model gates
    runners_up: list[Candidate] = Field(default_factory=list)


class SearchState(Contract):
    """Everything SearchKernel carries across continue-as-new (``SearchKernelInput.state``).

    The tree itself is the policy module's plain-dict form, so the workflow can
    rebuild it without any model of its own; the rest is typed.
    """

    iteration: int = 0
    tree: dict[str, Any] = Field(default_factory=dict)
    directions: list[str] = Field(default_factory=list)  # every plan direction, in order
    decisions: list[Decision] = Field(default_factory=list)
    ledger: list[LedgerEntry] = Field(default_factory=list)
    log_pages: list[ArtifactRef] = Field(default_factory=list)  # what was archived, in order
    archived_accepted: int = 0  # accepted (non-retime) decisions among the archived
    experience: list[Experience] = Field(default_factory=list)
    usage: Usage = Usage()
    gpu_seconds: float = 0.0
    wall_seconds: float = 0.0  # wall time of earlier runs (before continue-as-new)
    budget_left: dict[str, float | None] = Field(default_factory=dict)
    memory: ArtifactRef | None = None
    sources: dict[str, ArtifactRef] = Field(default_factory=dict)  # node id -> source
    candidates: dict[str, Candidate] = Field(default_factory=dict)  # node id -> candidate
    profiles: dict[str, ProfileResult] = Field(default_factory=dict)  # node id -> profile
    tried_labels: list[str] = Field(default_factory=list)
    # node id -> plans developed from that state (LLM mode), the newest few per state
    tried_plans: dict[str, list[Plan]] = Field(default_factory=dict)
    candidates_tried: int = 0
    candidates_compiled: int = 0
    stopped_reason: str = ""


SummarizeInput.model_rebuild()
