"""A baseline torch.compile cannot compile says why, and what to do, in one line."""

from __future__ import annotations

from gates.perf import PerfMeasurement
from gates.perf_verdict import perf_verdict
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateSettings, GateStatus

# what the timing child reported on the H200 and here for x[torch.randperm(n)]
INDUCTOR_REFUSAL = (
    "backend='inductor' raised:\n"
    "RuntimeError: Not all inputs to pattern found in match.kwargs.\n\n"
    "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
)


def _failed(error_type: str, message: str) -> ChildOutcome:
    return ChildOutcome(
        status="exception", phase="base_warm", wall_s=1.0, error_type=error_type, message=message
    )


def test_the_compilers_cause_and_the_way_out_are_in_the_reason() -> None:
    m = PerfMeasurement(failure=("baseline", _failed("BackendCompilerFailed", INDUCTOR_REFUSAL)))
    settings = GateSettings(device="cuda")
    v, category, speedup = perf_verdict(m, settings=settings, gamma=1.03, roofline=None)
    assert v.status == GateStatus.ERROR and category is None and speedup is None
    assert "raised: RuntimeError: Not all inputs to pattern found" in v.reason
    assert "cannot compile this forward" in v.reason and "--baseline-mode eager" in v.reason
    assert "TORCHDYNAMO_VERBOSE" not in v.reason


def test_other_baseline_failures_get_no_compiler_hint() -> None:
    m = PerfMeasurement(failure=("baseline", _failed("RuntimeError", "CUDA out of memory")))
    v, _, _ = perf_verdict(m, settings=GateSettings(device="cuda"), gamma=1.03, roofline=None)
    assert (
        v.reason == "baseline could not be timed: RuntimeError during base_warm: CUDA out of memory"
    )
