"""Gate verdicts: a rejected candidate is data, never an exception."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import ArtifactRef, Frozen
from .compiled import CompileResult, SearchTarget, SegmentResult


class GateName(StrEnum):
    STATIC = "static"
    CORRECTNESS = "correctness"
    MODEL = "model"  # V_model, float64 error-ratio rule on the re-stitched model
    PERFORMANCE = "performance"  # V_perf


class GateStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # the candidate is wrong / slow: a verdict
    ERROR = "error"  # the candidate crashed, hung, faulted: also a verdict
    QUARANTINE = "quarantine"  # suspicious timing (beyond roofline, timers disagree): re-time


class GateVerdict(Frozen):
    gate: GateName
    status: GateStatus
    reason: str
    metrics: dict[str, Any] = Field(default_factory=dict)  # every number the verdict used
    thresholds: dict[str, Any] = Field(default_factory=dict)
    feedback: str = ""  # text fit to hand back to the kernel-writing agent
    gpu_seconds: float = 0.0
    log: ArtifactRef | None = None

    @property
    def passed(self) -> bool:
        return self.status == GateStatus.PASS


class PerfCategory(StrEnum):
    OPTIMIZED = "optimized"  # faster by at least gamma
    MATCHED = "matched"  # within the noise band
    SLOWER = "slower"  # -> fallback


class CandidateGateInput(Frozen):
    """Gates 1-2 for one candidate of one search target."""

    compiled: CompileResult
    segment: SegmentResult
    target: SearchTarget
    candidate_id: str
    source: ArtifactRef
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    rtol: float = 1e-3
    atol: float = 1e-3
    timeout_s: float = 300.0
    measure_kernel_speedup: bool = True  # per-target timing to rank candidates in the beam


class CandidateGateResult(Frozen):
    candidate_id: str
    verdicts: list[GateVerdict]
    kernel_ms: float | None = None  # per-target time of the candidate (not the model)
    baseline_kernel_ms: float | None = None

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)


class ModelGateInput(Frozen):
    """Gates 3-4 on a re-stitched model."""

    compiled: CompileResult
    wrapper: ArtifactRef  # re-stitched wrapper
    gamma: float = 1.03
    tolerance: float = 1e-4
    rho_max: float = 10.0
    timeout_s: float = 900.0


class ModelGateResult(Frozen):
    verdict: GateVerdict
    category: PerfCategory | None = None
    speedup: float | None = None
    baseline_ms: float | None = None
    candidate_ms: float | None = None
