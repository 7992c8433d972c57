"""Campaign entry points: ``gate_candidate`` (gates 1-2, or 1-3) and ``gate_model`` (gates 3-4).

Library functions ``fn(inp, store) -> result`` that the activities run in a
supervised child (``activities/gate_activities.py``); they spawn the gate
children themselves.  Both compare against the eager reference built from the
problem's own seed -- the weights the compile step captured.

* single-kernel mode (target kind ``forward``): the candidate source defines
  ``ModelNew`` and is checked exactly like ``kernelopt verify``;
* multi-kernel mode: the candidate is spliced into Inductor's wrapper with the
  compile package's ``build_restitched`` and the re-stitched model is checked
  end to end.  A wrapper is specialised to the captured shapes, so held-out
  shapes are not used there (held-out seeds and new-values calls still are).

With ``model_gate`` (the search asks for it), ``gate_candidate`` also runs gate 3
on a candidate that passed gate 2: the reference child computes the float64
outputs too and the parent compares the candidate child's outputs against them,
so a small systematic error (a padding bug, reduced-precision arithmetic) that
gate 2's 1e-3 lets through is rejected, and fixed, inside the search instead of
after it.  No process is added; the cost is the float64 forward in the
reference child and one more comparison.

Timings rank candidates by the whole forward pass (the only time that moves
between two candidates of one target is that target's): ``kernel_ms`` and
``baseline_kernel_ms`` are forward times of the re-stitched model and of the
baseline wrapper, measured in fresh processes like gate 4.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from gates.cascade import roofline_inputs, round_setup, run_gates_1_to_3
from gates.correctness import excused_text
from gates.gpu_lease import gpu_section
from gates.layout import CompiledLayout
from gates.perf import PerfMeasurement, measure, prestart_round
from gates.perf_verdict import dispatch_overhead, perf_verdict, timing_summary
from gates.prestart import PrestartedRound
from gates.protocol import ModelSource
from gates.reference import ReferenceBundle, prepare_reference
from gates.reference_cache import shared_reference
from gates.runner import ChildOutcome
from kernelopt.contracts.compiled import CompileResult, TargetKind
from kernelopt.contracts.verdicts import (
    CandidateGateInput,
    CandidateGateResult,
    GateName,
    GateSettings,
    GateStatus,
    GateVerdict,
    ModelGateInput,
    ModelGateResult,
)
from kernelopt.errors import DeterministicError
from kernelopt.log import get_logger
from kernelopt.stages import StageClock
from kernelopt.store import ArtifactStore

log = get_logger(__name__)


class _Workspace(CompiledLayout):
    """The layout in a temporary directory of its own, removed by ``close``."""

    def __init__(self, compiled: CompileResult, store: ArtifactStore) -> None:
        super().__init__(compiled, store, Path(tempfile.mkdtemp(prefix="kernelopt-gate-")))

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _candidate_source(
    ws: _Workspace, inp: CandidateGateInput
) -> tuple[ModelSource | None, GateVerdict | None]:
    """The model to check, or a static verdict when the candidate does not fit its target."""
    try:
        source, forms = ws.candidate_source(inp.target, inp.segment, inp.source, inp.candidate_id)
    except DeterministicError as exc:
        return None, GateVerdict(
            gate=GateName.STATIC,
            status=GateStatus.ERROR,
            reason=f"cannot be re-stitched: {exc}",
            metrics={"target": inp.target.id, "kernels": inp.target.kernels},
            feedback=(
                f"Your code could not be put back into the compiled model: {exc}. Follow the "
                "candidate contract for this target exactly (function name and parameters, or "
                "launch(*args))."
            ),
        )
    if forms:
        log.info("gate_candidate.restitched", target=inp.target.id, forms=forms)
    return source, None


def gate_candidate(inp: CandidateGateInput, store: ArtifactStore) -> CandidateGateResult:
    """Gates 1-2 (1-3 with ``model_gate``) for one candidate, plus forward timings to rank it."""
    forward = inp.target.kind == TargetKind.FORWARD
    settings = inp.settings.model_copy(
        update={
            "seeds": list(inp.seeds),
            "rtol": inp.rtol,
            "atol": inp.atol,
            "static_timeout_s": inp.timeout_s,
            "model_seed": inp.compiled.problem.seed,
            "holdout_shapes": forward and inp.settings.holdout_shapes,
            "run_model_gate": inp.model_gate,
        }
    )
    gates_stage = "gates_1_3" if inp.model_gate else "gates_1_2"
    stages = StageClock()
    ws = _Workspace(inp.compiled, store)
    try:
        candidate, early = _candidate_source(ws, inp)
        if early is not None or candidate is None:
            return CandidateGateResult(
                candidate_id=inp.candidate_id, verdicts=[early] if early else []
            )
        stages.lap("setup")
        # untimed GPU work may share the GPU with other gates' until the timing (``measure``
        # takes it alone); the prestarted timing child builds its baseline under this hold
        with (
            gpu_section("shared", settings.device),
            shared_reference(ws.problem_path, settings, ws.dir / "reference") as bundle,
        ):
            return _judge_candidate(inp, ws, candidate, bundle, settings, stages, gates_stage)
    finally:
        ws.close()


def _judge_candidate(
    inp: CandidateGateInput,
    ws: _Workspace,
    candidate: ModelSource,
    bundle: ReferenceBundle,
    settings: GateSettings,
    stages: StageClock,
    gates_stage: str,
) -> CandidateGateResult:
    """``gate_candidate`` once it has its reference: gates 1-2 (or 1-3), then the timings."""
    timing_settings = settings.model_copy(update={"min_rounds": 1, "max_rounds": 1})
    prestarted = None
    # a turn session starts children of its own (gates/turns.py): nothing to prestart
    if (
        settings.prestart_timing
        and not settings.turn_pairs
        and inp.measure_kernel_speedup
        and bundle.ok
    ):
        bundle.guard(*ws.child_files())
        prestarted = prestart_round(
            ws.baseline_for(candidate.kind == "candidate"),
            candidate,
            round_setup(bundle, timing_settings, graph_replay=True),
            workdir=ws.dir / "timing",
            watched=bundle.caches.dirs,
        )
    try:
        return _gates_and_timing(
            inp, ws, candidate, bundle, settings, timing_settings, stages, gates_stage, prestarted
        )
    finally:
        if prestarted is not None:
            prestarted.stop()  # gates 1-3 did not pass (or raised): it ends unused


def _gates_and_timing(
    inp: CandidateGateInput,
    ws: _Workspace,
    candidate: ModelSource,
    bundle: ReferenceBundle,
    settings: GateSettings,
    timing_settings: GateSettings,
    stages: StageClock,
    gates_stage: str,
    prestarted: PrestartedRound | None,
) -> CandidateGateResult:
    verdicts = _gates_on(ws, bundle, candidate, settings, stages, gates_stage)
    kernel_ms = baseline_ms = None
    timing: dict[str, Any] = {}
    if all(v.passed for v in verdicts) and inp.measure_kernel_speedup:
        m = measure(
            ws.baseline_for(candidate.kind == "candidate"),
            candidate,
            round_setup(bundle, timing_settings, graph_replay=True),
            workdir=ws.dir / "timing",
            tampered_inputs=bundle.tampered_inputs,
            before_candidate=bundle.before_candidate,
            prestarted=prestarted,
        )
        v4, _, _ = perf_verdict(
            m,
            settings=timing_settings,
            gamma=settings.gamma,
            roofline=roofline_inputs(bundle, bundle.input_sets[0].name),
        )
        if m.baseline and m.candidate:
            baseline_ms = v4.metrics["baseline"]["median_ms"]
            kernel_ms = v4.metrics["candidate"]["median_ms"]
            timing = timing_summary(v4.metrics)
        # A suspicious or broken measurement rejects here, and so does a faster kernel
        # in a slower forward (dispatch overhead); otherwise "slower" is ranking data.
        suspicious = v4.metrics.get("tampered") or v4.metrics.get("inputs_tampered")
        dispatch = dispatch_overhead(v4, settings.gamma)
        if v4.status in (GateStatus.ERROR, GateStatus.QUARANTINE) or suspicious:
            verdicts.append(v4)
        elif dispatch is not None:
            verdicts.append(dispatch)
        _timing_stages(stages, m)
    stages.seconds["cache_guard"] = round(bundle.caches.seconds, 3)
    log.info("candidate gated", candidate_id=inp.candidate_id, **stages.seconds)
    return CandidateGateResult(
        candidate_id=inp.candidate_id,
        verdicts=_with_reference(verdicts, bundle),
        kernel_ms=kernel_ms,
        baseline_kernel_ms=baseline_ms,
        timing=timing,
        stage_seconds=stages.seconds,
    )


def _gates_on(
    ws: _Workspace,
    bundle: ReferenceBundle,
    candidate: ModelSource,
    settings: GateSettings,
    stages: StageClock,
    gates_stage: str,
) -> list[GateVerdict]:
    """Gates 1-3 on ``candidate`` against the eager reference (its inputs guarded against
    the compiled files): what both entry points run first, each lap in ``stages``."""
    if not bundle.ok:
        raise DeterministicError(f"reference could not run: {bundle.outcome.describe()}")
    bundle.guard(*ws.child_files())
    _reference_stages(stages, bundle)
    parts = StageClock()
    verdicts, child = run_gates_1_to_3(
        bundle, candidate, settings, ws.dir / "candidate", stages=parts
    )
    _gate_stages(stages, gates_stage, parts, child)
    return verdicts


def _with_reference(verdicts: list[GateVerdict], bundle: ReferenceBundle) -> list[GateVerdict]:
    """Every verdict names the reference bundle that judged it (and which use of it)."""
    return [
        v.model_copy(update={"metrics": {**v.metrics, "reference": bundle.audit()}})
        for v in verdicts
    ]


def _reference_stages(stages: StageClock, bundle: ReferenceBundle) -> None:
    """The reference's lap; its child's wall time and phases only where it ran for this one,
    else those of the child that made this use's draw of a kept bundle."""
    stages.lap("reference")
    if bundle.use == 1:
        stages.seconds["reference_child"] = round(bundle.outcome.wall_s, 3)
        stages.seconds.update(bundle.outcome.phase_seconds("ref"))
    elif bundle.draw_outcome is not None:
        stages.seconds["reference_draw_child"] = round(bundle.draw_outcome.wall_s, 3)
        stages.seconds.update(bundle.draw_outcome.phase_seconds("draw"))


def _gate_stages(stages: StageClock, name: str, parts: StageClock, child: ChildOutcome) -> None:
    """The candidate child's gates: their lap, the parent's parts, the child's phases."""
    stages.lap(name)
    stages.seconds.update({f"{name}.{k}": v for k, v in parts.seconds.items()})
    stages.seconds.update(child.phase_seconds("cand"))


def _timing_stages(stages: StageClock, m: PerfMeasurement) -> None:
    stages.lap("timing")
    stages.seconds["timing_children"] = round(m.seconds, 3)
    if m.prestarted:
        stages.seconds["timing_prestarted"] = 1.0
    stages.seconds.update(m.phase_seconds)


def _model_settings(inp: ModelGateInput) -> GateSettings:
    return inp.settings.model_copy(
        update={
            "seeds": list(inp.seeds),
            "gamma": inp.gamma,
            "model_tolerance": inp.tolerance,
            "rho_max": inp.rho_max,
            "model_seed": inp.compiled.problem.seed,
            "holdout_shapes": inp.source_kind == "forward" and inp.settings.holdout_shapes,
            "run_model_gate": True,
        }
    )


# gate 4's baseline this much slower than the compile's own timing of it: logged, and the
# ratio is kept in every model verdict (``baseline_vs_compile``) until one H200 series says
# where a threshold that acts belongs
BASELINE_DRIFT_WARN = 1.5


def baseline_drift(gate_ms: float | None, compiled_ms: float) -> float | None:
    """Gate 4's baseline median over the compile's timing of the same wrapper.

    Well above 1, the baseline ran slower than when it was compiled and every speedup
    against it reads high: a tuning pick made on a busy GPU, or other work beside it.
    """
    if not gate_ms or compiled_ms <= 0:
        return None
    return round(gate_ms / compiled_ms, 3)


def gate_model(inp: ModelGateInput, store: ArtifactStore) -> ModelGateResult:
    """Gates 3-4 on a re-stitched model: V_model end to end, then V_perf vs the baseline wrapper."""
    settings = _model_settings(inp)
    stages = StageClock()
    ws = _Workspace(inp.compiled, store)
    try:
        with gpu_section("shared", settings.device):  # ``measure`` takes the GPU alone
            return _judge_model(inp, ws, store, settings, stages)
    finally:
        ws.close()


def _judge_model(
    inp: ModelGateInput,
    ws: _Workspace,
    store: ArtifactStore,
    settings: GateSettings,
    stages: StageClock,
) -> ModelGateResult:
    """``gate_model`` in its workspace: a fresh reference, V_model, then V_perf."""
    if inp.source_kind == "forward":
        path = store.materialize(inp.wrapper, ws.dir, "candidate_forward.py")
        candidate = ModelSource(
            kind="candidate", problem_path=ws.problem_path, candidate_path=str(path)
        )
    else:
        candidate = ws.wrapper_source(inp.wrapper)
    # always a fresh reference: the verdict that accepts is judged on sets no earlier
    # candidate or feedback text has seen (gates/README.md)
    bundle = prepare_reference(ws.problem_path, settings, ws.dir / "reference")
    early = _with_reference(_gates_on(ws, bundle, candidate, settings, stages, "gates_1_3"), bundle)
    v_model = _as_model_verdict(early)
    if not v_model.passed:
        stages.seconds["cache_guard"] = round(bundle.caches.seconds, 3)
        return ModelGateResult(verdict=v_model, verdicts=[v_model], stage_seconds=stages.seconds)
    first = bundle.input_sets[0].name
    m = measure(
        ws.baseline_for(inp.source_kind == "forward"),
        candidate,
        round_setup(bundle, settings),
        workdir=ws.dir / "timing",
        tampered_inputs=bundle.tampered_inputs,
        before_candidate=bundle.before_candidate,
        gamma=inp.gamma,
    )
    v_perf, category, speedup = perf_verdict(
        m, settings=settings, gamma=inp.gamma, roofline=roofline_inputs(bundle, first)
    )
    _timing_stages(stages, m)
    stages.seconds["cache_guard"] = round(bundle.caches.seconds, 3)
    if v_perf.metrics.get("infrastructure"):
        raise RuntimeError(v_perf.reason)  # retryable: the baseline itself did not time
    base = v_perf.metrics["baseline"]["median_ms"] if m.baseline else None
    cand = v_perf.metrics["candidate"]["median_ms"] if m.candidate else None
    drift = baseline_drift(base, inp.compiled.compiled_ms)
    if drift is not None:
        v_perf = v_perf.model_copy(
            update={"metrics": {**v_perf.metrics, "baseline_vs_compile": drift}}
        )
        if drift > BASELINE_DRIFT_WARN:
            log.warning(
                "baseline_slower_than_at_compile",
                ratio=drift,
                gate_ms=base,
                compiled_ms=inp.compiled.compiled_ms,
            )
    return ModelGateResult(
        verdict=v_perf,
        category=category,
        speedup=speedup,
        baseline_ms=base,
        candidate_ms=cand,
        verdicts=[v_model, v_perf],
        stage_seconds=stages.seconds,
    )


def _with_excused(model: GateVerdict, verdicts: list[GateVerdict]) -> GateVerdict:
    """``model`` saying how many elements gate 2 let pass only because they are nearer the
    float64 reference than eager's own (the outcome states every excuse it rests on)."""
    gate2 = next((v for v in verdicts if v.gate == GateName.CORRECTNESS), None)
    excused = int(gate2.metrics.get("excused_by_float64", 0)) if gate2 else 0
    if not excused:
        return model
    return model.model_copy(
        update={
            "reason": model.reason + excused_text(excused),
            "metrics": {**model.metrics, "excused_by_float64": excused},
        }
    )


def _as_model_verdict(verdicts: list[GateVerdict]) -> GateVerdict:
    """Gate 3's verdict from the candidate child's run.

    A failure of the static or 1e-3 stage on the *whole model* (crash, unwritten
    output, mutated input, stale cache) is a V_model failure too: those checks
    are not part of the float64 rule, and the stricter gate must not pass what
    the looser one rejects.
    """
    model = next((v for v in verdicts if v.gate == GateName.MODEL), None)
    failing = next((v for v in verdicts if not v.passed), None)
    if failing is None and model is not None:
        return _with_excused(model, verdicts)
    if failing is None:
        return GateVerdict(
            gate=GateName.MODEL, status=GateStatus.ERROR, reason="no V_model verdict"
        )
    if failing.gate == GateName.MODEL:
        return failing
    return failing.model_copy(
        update={
            "gate": GateName.MODEL,
            "reason": f"end-to-end {failing.gate.value} check failed: {failing.reason}",
        }
    )
