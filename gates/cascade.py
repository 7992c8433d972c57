"""The four gates in order, cheap first, on a KernelBench-style candidate (``ModelNew``).

This is ``kernelopt verify`` and the single-kernel (forward) path of the
campaign activities.  Processes per verdict: one reference child (reusable
across candidates of the same problem), one candidate child for gates 1-3
(gate 3 reuses gate 2's outputs against the float64 reference), and
2 x ``rounds`` fresh timing children for gate 4.  The first gate that does
not pass ends the cascade; its verdict carries the feedback.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gates.correctness import correctness_verdict, load_candidate_outputs
from gates.feedback import TAMPERED_INPUTS_FEEDBACK
from gates.gpu_lease import gpu_section
from gates.model_gate import model_verdict_from_sets
from gates.numerics import comparison_threads
from gates.perf import RooflineInputs, RoundSetup, TimingChecks, measure, prestart_round
from gates.perf_verdict import perf_verdict
from gates.prestart import PrestartedRound
from gates.problem_io import inputs_after, state_after
from gates.protocol import CandidateJob, ModelSource
from gates.reference import ReferenceBundle, checked_if_cut, prepare_reference
from gates.runner import ChildOutcome, run_job
from gates.static import split_seconds, static_verdict
from kernelopt.contracts.verdicts import (
    CascadeResult,
    GateName,
    GateSettings,
    GateStatus,
    GateVerdict,
)
from kernelopt.stages import StageClock


def _leaf_nbytes(shapes: list[list[int] | None], dtypes: list[str | None]) -> list[int]:
    sizes = []
    for shape, dtype in zip(shapes, dtypes, strict=True):
        if shape is None or dtype is None:
            continue
        numel = 1
        for d in shape:
            numel *= d
        sizes.append(numel * torch.empty((), dtype=getattr(torch, dtype)).element_size())
    return sizes


def baseline_source(problem_path: str, settings: GateSettings) -> ModelSource:
    if settings.baseline_mode == "eager":
        return ModelSource(kind="eager", problem_path=problem_path)
    return ModelSource(
        kind="compiled", problem_path=problem_path, compile_mode=settings.baseline_mode
    )


def run_gates_1_to_3(
    bundle: ReferenceBundle,
    candidate: ModelSource,
    settings: GateSettings,
    workdir: Path,
    stages: StageClock | None = None,
) -> tuple[list[GateVerdict], ChildOutcome]:
    """Gates 1-3 from one candidate child; stops at the first gate that does not pass.

    ``stages`` gets the parent's own parts (arming the guards, the child, the
    shared-file checks, the comparisons): on the H200 they were ~3 s per run
    outside the child's phases, and this says which.
    """
    clock = stages or StageClock()
    if bundle.corrupted:
        raise RuntimeError("the reference inputs were overwritten beyond repair: prepare a new one")
    out_dir = workdir / "outputs"
    out_dir.mkdir(parents=True, exist_ok=True)
    ref_sets = [info for s in bundle.input_sets if (info := bundle.set_info(s.name)) is not None]
    job = CandidateJob(
        model=candidate,
        device=settings.device,
        model_seed=settings.model_seed,
        input_sets=bundle.input_sets,
        inputs_dir=str(bundle.inputs_dir),
        out_dir=str(out_dir),
        output_nbytes=[_leaf_nbytes(s.output_shapes, s.output_dtypes) for s in ref_sets],
        expected=[bundle.expected_outputs(s.name) for s in ref_sets],
        expected_structures=[s.output_structure for s in ref_sets],
        reference_mutates=[s.mutates_inputs for s in ref_sets],
    )
    # the cache-guard window lies inside the lease: an exclusive section (a compile that
    # autotunes) rewrites caches, and one run between arming and the child would be blamed
    with gpu_section("shared", settings.device):
        clock.lap("lease")
        bundle.before_candidate()
        clock.lap("arm")
        with checked_if_cut(bundle.tampered_inputs):
            outcome = run_job(
                job, workdir / "child", timeout_s=settings.static_timeout_s, device=settings.device
            )
        clock.lap("child")
        tampered = bundle.tampered_inputs()
        clock.lap("shared_files")
    on_gpu = settings.device.startswith("cuda")
    s1, s2 = split_seconds(outcome) if on_gpu else (0.0, 0.0)
    verdicts = [static_verdict(outcome, timeout_s=settings.static_timeout_s, seconds=s1)]
    if tampered:
        verdicts.append(
            GateVerdict(
                gate=GateName.CORRECTNESS,
                status=GateStatus.FAIL,
                reason=f"candidate rewrote shared files {tampered} (restored)",
                metrics={"inputs_tampered": tampered},
                feedback=TAMPERED_INPUTS_FEEDBACK,
                gpu_seconds=s2,
            )
        )
        return verdicts, outcome
    if not verdicts[-1].passed:
        return verdicts, outcome
    names = [s.name for s in bundle.input_sets]
    outs = load_candidate_outputs(out_dir, names)
    after = load_candidate_outputs(
        out_dir, [inputs_after(n) for n in names] + [state_after(n) for n in names]
    )
    clock.lap("load_outputs")
    with comparison_threads():
        v2 = correctness_verdict(bundle, outcome, outs, settings, seconds=s2, inputs=after)
    # the gate says how the calls were made (audit, feedback): mode, seeding, state
    v2 = v2.model_copy(update={"metrics": {**v2.metrics, "evaluation": bundle.policy.summary()}})
    clock.lap("compare")
    verdicts.append(v2)
    if not v2.passed or not settings.run_model_gate:
        return verdicts, outcome
    sets = [
        (
            s.name,
            outs[s.name],
            bundle.refs[s.name],
            bundle.refs64[s.name] if bundle.refs64 is not None else None,
        )
        for s in bundle.input_sets
    ]
    with comparison_threads():
        v3 = model_verdict_from_sets(
            sets,
            tolerance=settings.model_tolerance,
            rho_max=settings.rho_max,
            settings=settings,
            fp64_error=bundle.result.fp64_error if bundle.result else "",
            facts=bundle.facts,
        )
    verdicts.append(v3)
    clock.lap("model")
    return verdicts, outcome


def evaluation_environment(bundle: ReferenceBundle) -> dict[str, Any]:
    """The evaluation policy used (issue 30), for the outcome, the audit and ``verify``."""
    policy = bundle.policy
    env: dict[str, Any] = {
        "evaluation": policy.summary(),
        "policy": policy.model_dump(mode="json", exclude={"call_seeds"}),
    }
    if bundle.result is not None and bundle.result.estimate_note:
        env["estimate"] = bundle.result.estimate_note
    if policy.inputs_note:
        env["inputs"] = policy.inputs_note
    return env


def round_setup(
    bundle: ReferenceBundle, settings: GateSettings, *, graph_replay: bool = False
) -> RoundSetup:
    """Gate 4's rounds on this bundle: its input files and first set; every timed call
    rotates over the bundle's same-shape sets and is checked against them."""
    return RoundSetup(
        inputs_dir=bundle.inputs_dir,
        input_set=bundle.input_sets[0].name,
        settings=settings,
        checks=TimingChecks(
            input_sets=bundle.timing_rotation(),
            expected=bundle.timed_outputs(),
            effects=bundle.side_effects(),
            check=bundle.check_timed,
            baseline_first_sight=bundle.first_sight_sets(),
            sealed=bundle.sealed_sets,
            sealed_dir=str(bundle.sealed_dir),
        ),
        graph_replay=graph_replay,
        baseline_dispatch_bound=bool(bundle.baseline_dispatch_bound),
    )


def roofline_inputs(bundle: ReferenceBundle, set_name: str) -> RooflineInputs | None:
    if bundle.result is None:
        return None
    info = bundle.set_info(set_name)
    if info is None:
        return None
    return RooflineInputs(
        device_name=bundle.result.device_name,
        bytes_in=info.input_bytes + bundle.result.param_bytes,
        bytes_out=info.output_bytes,
        flops=bundle.result.flops,
    )


def verify_candidate(
    problem_path: str | Path,
    candidate_path: str | Path,
    settings: GateSettings | None = None,
    *,
    workdir: Path | None = None,
    bundle: ReferenceBundle | None = None,
    keep_files: bool = False,
    before_gates: Callable[[], object] | None = None,
) -> CascadeResult:
    """Run the whole cascade.  Pass ``bundle`` to reuse one reference for many candidates;
    ``before_gates`` runs once the reference is ready (a command waits there for its
    zygote, which loads while the reference is prepared)."""
    settings = settings or GateSettings()
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix="kernelopt-verify-")
        workdir = Path(tmp)
    try:
        # shared until gate 4 takes the GPU alone (``measure``): the prestarted timing child
        # builds its baseline under this hold
        with gpu_section("shared", settings.device):
            return _verify_in(problem_path, candidate_path, settings, workdir, bundle, before_gates)
    finally:
        if tmp is not None and not keep_files:
            shutil.rmtree(tmp, ignore_errors=True)


def _verify_in(
    problem_path: str | Path,
    candidate_path: str | Path,
    settings: GateSettings,
    workdir: Path,
    bundle: ReferenceBundle | None,
    before_gates: Callable[[], object] | None = None,
) -> CascadeResult:
    """The cascade on ``bundle``, or on a reference built here: then its wall time counts in
    the result's, as its device-seconds already do (the user waited for both)."""
    started = time.monotonic()
    built = bundle is None
    if bundle is None:
        bundle = prepare_reference(problem_path, settings, workdir / "reference")
    reference_wall = time.monotonic() - started if built else 0.0
    if before_gates is not None:
        before_gates()
    result = _gates_on_reference(bundle, candidate_path, settings, workdir)
    return result.model_copy(update={"wall_seconds": result.wall_seconds + reference_wall})


def _gates_on_reference(
    bundle: ReferenceBundle, candidate_path: str | Path, settings: GateSettings, workdir: Path
) -> CascadeResult:
    prestarted = _prestart(bundle, candidate_path, settings, workdir)
    try:
        result = check_candidate(bundle, candidate_path, settings, workdir)
        if settings.run_perf and result.verdicts and all(v.passed for v in result.verdicts):
            slow = too_slow_for_cpu_timing(result, settings)
            if slow:
                return timing_skipped(result, slow)
            result = time_candidate(result, bundle, settings, workdir, prestarted=prestarted)
        return result
    finally:
        if prestarted is not None:
            prestarted.stop()  # gates 1-3 did not pass: it ends having run nothing


def _prestart(
    bundle: ReferenceBundle, candidate_path: str | Path, settings: GateSettings, workdir: Path
) -> PrestartedRound | None:
    """Gate 4's first round started now, when ``settings.prestart_timing`` asks for it (not
    with turns: a turn session starts children of its own)."""
    if not (settings.prestart_timing and settings.run_perf and bundle.ok) or settings.turn_pairs:
        return None
    problem = str(Path(bundle.problem_path).resolve())
    path = str(Path(candidate_path).resolve())
    return prestart_round(
        baseline_source(problem, settings),
        ModelSource(kind="candidate", problem_path=problem, candidate_path=path),
        round_setup(bundle, settings),
        workdir=_candidate_dir(workdir, path) / "timing",
        watched=bundle.caches.dirs,
    )


_CPU_CALL_LIMIT_S = 1.0  # slower checked calls: the CPU's timing loop would take minutes


def timing_skipped(result: CascadeResult, why: str) -> CascadeResult:
    """``result`` (gates 1-3 passed) with the reason gate 4 did not run on record."""
    return result.model_copy(update={"environment": {**result.environment, "gate_4": why}})


def too_slow_for_cpu_timing(result: CascadeResult, settings: GateSettings) -> str:
    """Why gate 4's checked loop is skipped on the CPU ('' when it runs).

    On the CPU gate 4 only exercises the checked loop (no speed claim); a
    problem whose calls take seconds under the Triton interpreter would spend
    minutes on it, so the verdict says it was skipped instead.
    """
    if settings.device.startswith("cuda"):
        return ""
    gate2 = next((v for v in result.verdicts if v.gate == GateName.CORRECTNESS), None)
    seconds = [c.get("seconds") or 0.0 for c in (gate2.metrics.get("calls", []) if gate2 else [])]
    slowest = max(seconds, default=0.0)
    if slowest <= _CPU_CALL_LIMIT_S:
        return ""
    return (
        f"skipped on the CPU: one checked call takes up to {slowest:.1f} s under the Triton "
        "interpreter (gate 4 makes no speed claim on the CPU; run it on a GPU)"
    )


def _candidate_dir(workdir: Path, candidate_path: str) -> Path:
    tag = hashlib.sha256(candidate_path.encode()).hexdigest()[:10]
    return workdir / f"candidate-{Path(candidate_path).stem}-{tag}"


def check_candidate(
    bundle: ReferenceBundle, candidate_path: str | Path, settings: GateSettings, workdir: Path
) -> CascadeResult:
    """Gates 1-3 (no timing): safe to run for several candidates at once."""
    started = time.monotonic()
    problem_path = str(Path(bundle.problem_path).resolve())
    candidate_path = str(Path(candidate_path).resolve())
    if not bundle.ok or bundle.result is None:
        return CascadeResult(
            problem=problem_path,
            candidate=candidate_path,
            verdicts=[],
            accepted=False,
            could_not_run=True,
            reason=f"the reference could not run: {bundle.outcome.describe()}"
            + ("" if bundle.outcome.explained else "\n" + bundle.outcome.error_text(2000)),
            gpu_seconds=bundle.gpu_seconds,
            wall_seconds=time.monotonic() - started,
            settings=settings,
        )
    candidate = ModelSource(
        kind="candidate", problem_path=problem_path, candidate_path=candidate_path
    )
    cand_dir = _candidate_dir(workdir, candidate_path)
    parts = StageClock()
    verdicts, child = run_gates_1_to_3(bundle, candidate, settings, cand_dir, stages=parts)
    shutil.rmtree(cand_dir / "outputs", ignore_errors=True)  # judged: free the disk
    result = bundle.result
    stages = {
        "reference_child": round(bundle.outcome.wall_s, 3),
        **bundle.outcome.phase_seconds("ref"),
        **{f"gates_1_3.{k}": v for k, v in parts.seconds.items()},
        **child.phase_seconds("cand"),
    }
    return _finish(
        CascadeResult(
            problem=problem_path,
            candidate=candidate_path,
            verdicts=verdicts,
            accepted=False,
            settings=settings,
            environment={
                "device": result.device_name,
                "torch": result.torch_version,
                "triton": result.triton_version,
                "reference_seconds": round(bundle.outcome.wall_s, 3),
                "seeds": bundle.seeds_used,
                "held_out_shapes": result.holdout_note
                or ", ".join(s.name for s in bundle.input_sets if s.kind in ("holdout", "derived"))
                or "not asked for",
                "widened_values": result.widened_note
                or ", ".join(s.name for s in bundle.input_sets if s.kind == "widened")
                or "not asked for",
                **evaluation_environment(bundle),
                "stage_seconds": stages,
            },
        ),
        bundle,
        time.monotonic() - started,
    )


def time_candidate(
    checked: CascadeResult,
    bundle: ReferenceBundle,
    settings: GateSettings,
    workdir: Path,
    *,
    prestarted: PrestartedRound | None = None,
) -> CascadeResult:
    """Gate 4 for a candidate that passed gates 1-3.  Run one at a time per GPU
    (``prestarted``: its first round, started during gates 1-3)."""
    started = time.monotonic()
    candidate = ModelSource(
        kind="candidate", problem_path=checked.problem, candidate_path=checked.candidate
    )
    first = bundle.input_sets[0].name
    m = measure(
        baseline_source(checked.problem, settings),
        candidate,
        round_setup(bundle, settings),
        workdir=_candidate_dir(workdir, checked.candidate) / "timing",
        tampered_inputs=bundle.tampered_inputs,
        before_candidate=bundle.before_candidate,
        prestarted=prestarted,
    )
    if m.baseline_dispatch_bound is not None:  # for later candidates on this reference
        bundle.baseline_dispatch_bound = m.baseline_dispatch_bound
    v4, category, speedup = perf_verdict(
        m, settings=settings, gamma=settings.gamma, roofline=roofline_inputs(bundle, first)
    )
    stages = {
        **checked.environment.get("stage_seconds", {}),
        "timing_children": round(m.seconds, 3),
        "timing_rounds": len(m.candidate),
        **({"timing_prestarted": 1.0} if m.prestarted else {}),
        **m.phase_seconds,
    }
    update: dict[str, Any] = {
        "environment": {**checked.environment, "stage_seconds": stages},
        "verdicts": [*checked.verdicts, v4],
        "category": category,
        "speedup": speedup,
        "could_not_run": bool(v4.metrics.get("infrastructure")),
    }
    decision = v4.metrics.get("decision")
    if decision:
        update["speedup_interval"] = [decision["speedup_low"], decision["speedup_high"]]
    if m.baseline and m.candidate:
        update["baseline_ms"] = v4.metrics["baseline"]["median_ms"]
        update["candidate_ms"] = v4.metrics["candidate"]["median_ms"]
    return _finish(
        checked.model_copy(update=update),
        bundle,
        checked.wall_seconds + time.monotonic() - started,
    )


def _finish(result: CascadeResult, bundle: ReferenceBundle, wall: float) -> CascadeResult:
    """Derive acceptance, the deciding gate, the reason and the cost from the verdicts."""
    failing = next((v for v in result.verdicts if not v.passed), None)
    return result.model_copy(
        update={
            "accepted": failing is None and bool(result.verdicts) and not result.could_not_run,
            "deciding_gate": failing.gate if failing else None,
            "reason": failing.reason if failing else _accepted_reason(result.verdicts),
            "gpu_seconds": bundle.gpu_seconds + sum(v.gpu_seconds for v in result.verdicts),
            "wall_seconds": wall,
        }
    )


def _accepted_reason(verdicts: list[GateVerdict]) -> str:
    perf = next((v for v in verdicts if v.gate == GateName.PERFORMANCE), None)
    if perf is not None:
        return perf.reason
    return "gates " + ", ".join(v.gate.value for v in verdicts) + " passed (no timing requested)"
