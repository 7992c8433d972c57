"""Pydantic contracts shared by workflows, activities, the CLI and tests.

Imports only pydantic and the standard library, so workflow code can use them
inside the Temporal sandbox.
"""

from .base import ArtifactRef, Contract, Frozen
from .campaign import (
    Budgets,
    BudgetUse,
    CampaignInput,
    CampaignOptions,
    CampaignPhase,
    CampaignProgress,
    CampaignState,
    ExportInput,
    ExportResult,
    Outcome,
    OutcomeCategory,
    ReportInput,
    ReportResult,
)
from .compiled import (
    CompileInput,
    CompileResult,
    FusionGroup,
    KernelArg,
    KernelTiming,
    LibraryCall,
    Replacement,
    RestitchInput,
    RestitchResult,
    SearchMode,
    SearchTarget,
    SegmentInput,
    SegmentResult,
    TargetKind,
    TensorSpec,
    TriageInput,
    TriageResult,
    TritonKernel,
)
from .problem import ProblemKind, ProblemSpec
from .search import (
    Analysis,
    Bottleneck,
    BuiltinProposeInput,
    BuiltinProposeResult,
    BuiltinVariant,
    Candidate,
    Decision,
    ExecuteInput,
    ExecuteResult,
    Experience,
    KernelProfile,
    Plan,
    PlanInput,
    PlanResult,
    ProfileInput,
    ProfileResult,
    ProposerConfig,
    ProposerKind,
    SearchKernelInput,
    SearchKernelResult,
    SearchParams,
    SummarizeInput,
    SummarizeResult,
    Usage,
)
from .verdicts import (
    CandidateGateInput,
    CandidateGateResult,
    GateName,
    GateStatus,
    GateVerdict,
    ModelGateInput,
    ModelGateResult,
    PerfCategory,
)

__all__ = [name for name in dir() if not name.startswith("_")]
