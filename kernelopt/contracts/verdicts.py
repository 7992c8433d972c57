"""Gate verdicts: a rejected candidate is data, never an exception."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import ArtifactRef, DeviceTimed, Frozen
from .compiled import CompileResult, SearchStepInput


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


class GateSettings(Frozen):
    """Every threshold and budget the cascade uses: one home for the defaults.

    The spec's numbers (docs/method.md, "Gates") are the defaults; the rest are the
    anti-gaming knobs this project added (see gates/README.md for why each exists).
    """

    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    heldout_seed: bool = True  # one extra random seed the candidate cannot anticipate
    holdout_shapes: bool = True  # use get_holdout_inputs() when the problem defines it
    # one more set of gates 2 and 3: a seed's float inputs negated and scaled (gates/README.md)
    widened_values: bool = True
    model_seed: int = 0  # weights are drawn from this seed on both sides
    rtol: float = 1e-3
    atol: float = 1e-3
    scale_tol: float = 2e-3  # Linf(out - ref) / Linf(ref): zeros cannot hide under atol
    model_tolerance: float = 1e-4  # V_model: the stricter end-to-end tolerance
    rho_max: float = 10.0
    d_ref_floor: float = 1e-8  # below it the baseline is exact: scale-relative rule
    model_abs_bound: float = 1e-7  # absolute slack of the scale-relative rule
    gamma: float = 1.03
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    # > 0: a timing child's settling steps last at most about this many ms of wall time
    # each (and so does the events' warm-up after them); 0: a step is 25 ms of the
    # forward's GPU time, ~1,000 checked calls for a tiny forward (gates/README.md)
    settle_step_wall_ms: float = 0.0
    # start the first timing round's child before the candidate's gates 1-3 child, so it
    # builds the baseline meanwhile; it runs nothing more until they pass (gates/prestart.py).
    # Both levers stay off: with them on, the H200 timed identical code as a win
    # (docs/TEAM_NOTES.md, "Measured in the thirty-third session")
    prestart_timing: bool = False
    # a win decided by the host clock is checked against A/A rounds (the baseline in both
    # slots of the paired child); an advantage of the second slot they show is taken off
    # the candidate's speedup; 0: no such rounds (gates/README.md, "Order control")
    order_control_rounds: int = 2
    # > 0: before each timing round, wait up to this many seconds for a GPU that NVML shows
    # busy with work the gate does not own (gates/gpu_contention.py); 0: time at once
    quiet_gpu_wait_s: float = 0.0
    # > 0: each timing round is a turn session of this many ABBA pairs of turns between a
    # baseline child and a candidate child, and the pairs' ratios decide (gates/turns.py,
    # gates/README.md "Turns"); 0: paired rounds as before.  Off until the H200 confirms it
    turn_pairs: int = 0
    # > 0 (with turn_pairs 0): when gate 4's first paired round rests on the host clock (a
    # dispatch-bound forward), that round is set aside and turn sessions of this many pairs
    # decide instead (gates/README.md, "Turns for the host clock"); GPU-bound forwards keep
    # their paired rounds.  0: paired rounds throughout
    host_clock_turns: int = 12
    # ... unless that first round's ratio lies beyond this factor either way: turns make a
    # ratio near 1 trustworthy, and the harness work inside every turn (input copies, a
    # turn's fixed cost) pulls a far ratio towards 1, so paired rounds decide it
    host_clock_turns_max_ratio: float = 4.0
    # with host_clock_turns: a baseline an earlier verdict on the same reference found
    # dispatch-bound (its host time beyond DISPATCH_BOUND times its GPU work, read before
    # any candidate code was loaded) goes to turn sessions at once, without a paired probe
    # round of its own (batch ``verify``; gates/README.md).  Off until the H200 compares it
    reuse_host_probe: bool = False
    # A/A order-control rounds beyond the first of a verdict may be lent by earlier verdicts
    # of the same job in this process, at most 15 minutes old (gates/control_pool.py)
    control_pool: bool = True
    # with turns: take each turn's record phase off its window, up to the baseline's median
    # record phase (gates/turns.py step 5); off: the whole window is charged, records
    # included, which pulls every ratio towards 1 (records were 40% of a dispatch-bound
    # turn on the H200: docs/TEAM_NOTES.md, thirty-fourth session)
    turn_record_credit: bool = True
    # with turns: the idle probe before every turn runs in a third trusted child (no model, no
    # candidate) instead of the baseline's, so every turn, whichever side's, is entered from
    # and left to the same process.  With the baseline probing, a baseline turn is its own
    # process's before and after (warm caches, no switch), while a candidate turn pays a
    # switch in its window and another in the probe charged to it, a bias against every
    # candidate (docs/TEAM_NOTES.md, the forty-third session; gates/README.md "Turns";
    # scripts/turn_side_bias.py).  Off until the GPU A/B shows that it removes the bias
    turn_probe_child: bool = False
    # > 0: each child of a turn session prepares briefly: no settling steps, and its CUDA-event
    # warm-up and samples at most this many calls each.  The parent's alternating turns are
    # the host numbers, and each turn starts after the other side's anyway, so settling
    # steadies nothing they time (gates/README.md "Turns for the host clock").  0: each
    # child prepares as a paired round does
    turn_prep_calls: int = 200
    min_rep_calls: int = 10  # checked, timed calls per timing child at least (the CPU's few)
    # timing rounds, one fresh process each (baseline, then candidate); see gates/README.md
    min_rounds: int = 2
    # timing rounds whose candidate side also gets first-sight calls, each on sets of its own
    # (two sealed sets a round, drawn with the reference: gates.first_sight)
    first_sight_rounds: int = 2
    max_rounds: int = 6  # with four or more, outlier rounds are set aside (gates/perfstats.py)
    noisy_rounds: int = 4  # added past max_rounds only while the noise could flip the category
    spread_target: float = 0.03  # stop adding rounds once both sides agree this well
    # rounds the host clock decides (a dispatch-bound forward) whose spread is wide settle
    # their category by the extremes only from this many processes (gates/README.md)
    host_decisive_rounds: int = 4
    noise_limit: float = 0.10  # beyond this after max_rounds the timing is quarantined
    timer_disagree_rel: float = 0.5  # host timer above events by this fraction ...
    timer_disagree_abs_ms: float = 0.05  # ... and by this much -> quarantine
    roofline_slack: float = 0.5  # faster than slack x the bytes floor -> quarantine
    copy_bandwidth_gbs: float | None = None  # None: the device table (H200: 4300)
    device: str = "cuda"
    baseline_mode: str = "max-autotune-no-cudagraphs"  # torch.compile mode of the baseline
    static_timeout_s: float = 300.0  # import + build + dry-run + all correctness calls
    timing_timeout_s: float = 300.0  # one fresh timing process
    run_model_gate: bool = True
    run_perf: bool = True
    # how the model is evaluated (gates/call_policy.py): "auto" follows the file's
    # KERNELOPT_MODE, else KernelBench's convention (as constructed: training mode unless
    # the constructor calls eval()); "as_constructed", "train" or "eval" override both
    model_mode: str = "auto"
    # CPU only: a check estimated to take longer runs on a smaller batch (and says so)
    cpu_budget_s: float = 60.0
    # campaign path: a GPU worker's reference bundle judges up to this many successive
    # candidates of one problem (1: a fresh reference per candidate), for at most this long
    # (gates/reference_cache.py; why this is safe: gates/README.md).  Off by default: each
    # later use still runs a reference child for its own held-out draw (process, import,
    # build, determinism probe, float64) and checks the kept files, which costs about what
    # a fresh reference does, and most bundles serve one candidate; it pays only where the
    # seeded sets' forward dominates the reference child (docs/TEAM_NOTES.md, seventeenth
    # session)
    reference_uses: int = 1
    reference_max_age_s: float = 900.0


def pinned_gates(settings: GateSettings | None) -> dict[str, GateSettings]:
    """Keyword for a gate activity's input: the campaign's pinned settings, else none.

    Without it the input's default -- today's ``GateSettings()`` -- would apply, and a
    release that changes a default would change the gates of campaigns already running.
    """
    return {"settings": settings} if settings is not None else {}


class CandidateGateInput(SearchStepInput):
    """Gates 1-2 (and gate 3 when ``model_gate``) for one candidate of one search target."""

    candidate_id: str
    source: ArtifactRef
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    rtol: float = 1e-3
    atol: float = 1e-3
    timeout_s: float = 300.0
    measure_kernel_speedup: bool = True  # per-target timing to rank candidates in the beam
    settings: GateSettings = GateSettings()  # seeds/rtol/atol/timeout_s above take precedence
    # Gate 3 (float64 V_model, ``settings.model_tolerance``/``rho_max``) on every candidate that
    # passes gate 2, so a small systematic error is rejected (and fixed) inside the search.
    # False, the default, is what inputs scheduled before the field existed meant.
    model_gate: bool = False


class CandidateGateResult(DeviceTimed):
    candidate_id: str
    verdicts: list[GateVerdict]
    kernel_ms: float | None = None  # per-target time of the candidate (not the model)
    baseline_kernel_ms: float | None = None
    # the timing verdict's numbers for the agents' feedback (noise, interval, graph replay)
    timing: dict[str, Any] = Field(default_factory=dict)
    # where the activity's time went (reference, gates 1-2, timing): seconds, for tuning
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)

    @property
    def gates_label(self) -> str:
        """What a passing decision says it passed: gates 1-3 when gate 3 ran, else gates 1-2."""
        return "gates 1-3" if any(v.gate == GateName.MODEL for v in self.verdicts) else "gates 1-2"


class ModelGateInput(Frozen):
    """Gates 3-4 on a re-stitched model."""

    compiled: CompileResult
    wrapper: ArtifactRef  # re-stitched wrapper
    gamma: float = 1.03
    tolerance: float = 1e-4
    rho_max: float = 10.0
    timeout_s: float = 900.0
    # "wrapper": `wrapper` is a re-stitched Inductor wrapper; "forward": it is a
    # KernelBench ModelNew source (single-kernel mode), checked like `kernelopt verify`.
    source_kind: str = "wrapper"
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    settings: GateSettings = GateSettings()  # gamma/tolerance/rho_max above take precedence


class ModelGateResult(DeviceTimed):
    verdict: GateVerdict  # the deciding verdict (V_perf when V_model passed)
    category: PerfCategory | None = None
    speedup: float | None = None
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    verdicts: list[GateVerdict] = Field(default_factory=list)  # V_model then V_perf
    stage_seconds: dict[str, float] = Field(default_factory=dict)  # as CandidateGateResult's

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)


class CascadeResult(Frozen):
    """The full cascade on one candidate: what `kernelopt verify --json` prints."""

    problem: str
    candidate: str
    verdicts: list[GateVerdict]
    accepted: bool
    could_not_run: bool = False  # the problem / reference itself failed: exit code 2
    deciding_gate: GateName | None = None  # the first gate that did not pass
    reason: str = ""
    category: PerfCategory | None = None
    speedup: float | None = None
    speedup_interval: list[float] | None = None  # [low, high] over the timing rounds
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    gpu_seconds: float = 0.0  # child-process seconds spent on the device
    wall_seconds: float = 0.0
    settings: GateSettings = GateSettings()
    environment: dict[str, Any] = Field(default_factory=dict)  # torch/triton/device

    @property
    def exit_code(self) -> int:
        if self.could_not_run:
            return 2
        return 0 if self.accepted else 1

    @property
    def feedback(self) -> str:
        return "\n\n".join(v.feedback for v in self.verdicts if v.feedback and not v.passed)
