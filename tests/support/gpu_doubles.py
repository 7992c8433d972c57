"""Test implementations of the GPU activities, registered under the real names.

Tests only -- nothing here ships in the product.  They let a whole campaign
run on a CPU machine against the real Temporal server, the real workflows and
the real CPU activities (segmentation, the built-in proposer, reports):
every double is deterministic (verdicts derive from the candidate's source
hash), takes a little time while heartbeating (so a test can kill a worker in
the middle of one), and can log its start/end to a JSONL file (so a test can
check that no two ran at once on one worker).

Knobs (environment, read per call): KERNELOPT_DOUBLES_DELAY seconds per
activity (default 0.2), KERNELOPT_DOUBLES_LOG a JSONL file path,
KERNELOPT_DOUBLES_WRAPPER the wrapper the "compile" double returns (default: the
problem's H200 fixture in tests/fixtures/wrappers), KERNELOPT_DOUBLES_PROPOSALS a
folder where the built-in proposer's answers are remembered (tests/conftest.py sets
one per session).

Fault-injection knobs (all off by default; used by tests/durability):
KERNELOPT_DOUBLES_SLOW ``name=seconds,...`` overrides the delay of the named
activities; KERNELOPT_DOUBLES_CHECKPOINT ``name,...`` makes those doubles
heartbeat a resumable ``{"step": i, "steps": n}`` detail and, on a retry,
resume from ``activity.info().heartbeat_details`` like a real GPU activity
resuming from its checkpoint; KERNELOPT_DOUBLES_PROGRESS a JSONL file that
gets one record per step (so a test can kill a worker mid-activity and see
where the next attempt resumed); KERNELOPT_DOUBLES_HANG ``name=marker`` makes
the first call of that activity (the one that creates ``marker``) stop
heartbeating and hang for KERNELOPT_DOUBLES_HANG_S seconds (default 3600) --
a stuck activity that only a heartbeat timeout can notice.
KERNELOPT_DOUBLES_COMPILE_ERROR ``Type: message`` makes "compile" fail as the real
activity does when its child raises a deterministic error of that type (a forward
Inductor cannot compile: ``CaptureError``); its failure says it held the GPU for
KERNELOPT_DOUBLES_COMPILE_HELD_S seconds (default: the double's own run time), as the
real activity's says the run time it measured.
KERNELOPT_DOUBLES_RESTITCH_ERROR ``message`` makes every "restitch" fail as the real
one does when the re-stitched model raises on the captured arguments.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.scope import resolve_scope
from activities.search_activities import propose_builtin_on_gpu
from kernelopt.contracts import (
    Analysis,
    Bottleneck,
    CandidateGateInput,
    CandidateGateResult,
    CompileInput,
    CompileResult,
    GateName,
    GateStatus,
    GateVerdict,
    KernelProfile,
    KernelTiming,
    ModelGateInput,
    ModelGateResult,
    PerfCategory,
    ProfileInput,
    ProfileResult,
    RestitchInput,
    RestitchResult,
    TargetKind,
    TriageInput,
    TriageRef,
    TriageResult,
    names,
)
from kernelopt.contracts.screening import ScreeningEstimate, ScreenInput, ScreenResult
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult
from kernelopt.store import open_store
from tests.support.compiled import stub_compiled
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "wrappers"


def fixture_wrapper(problem_path: str) -> Path:
    """The wrapper captured on the H200 for this problem (problems/levelN/x.py -> levelN_x)."""
    path = Path(problem_path)
    return FIXTURES / f"{path.parent.name}_{path.stem}.py.txt"


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _named(env: str) -> dict[str, str]:
    """``a=1,b=2`` (or ``a,b``) from the environment as a dict."""
    out = {}
    for item in os.environ.get(env, "").split(","):
        name, _, value = item.strip().partition("=")
        if name:
            out[name] = value
    return out


def _append(path: str | None, record: dict) -> None:
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(record) + "\n")


def _resume_step(name: str) -> int:
    """The step a previous attempt heartbeated last (checkpointing doubles only)."""
    if name not in _named("KERNELOPT_DOUBLES_CHECKPOINT"):
        return 0
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], dict):
        return int(details[0].get("step", 0))
    return 0


async def _maybe_hang(name: str) -> None:
    """The first call of a hanging activity stops heartbeating (a stuck GPU call)."""
    marker = _named("KERNELOPT_DOUBLES_HANG").get(name)
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # another attempt already hung: this one works
    await asyncio.sleep(float(os.environ.get("KERNELOPT_DOUBLES_HANG_S", "3600")))


async def _work(name: str, key: str) -> None:
    """Sleep in small steps with heartbeats, recording start/end for concurrency checks."""
    slow = _named("KERNELOPT_DOUBLES_SLOW").get(name)
    delay = float(slow or os.environ.get("KERNELOPT_DOUBLES_DELAY", "0.2"))
    log_path = os.environ.get("KERNELOPT_DOUBLES_LOG")
    progress_path = os.environ.get("KERNELOPT_DOUBLES_PROGRESS")
    checkpoint = name in _named("KERNELOPT_DOUBLES_CHECKPOINT")
    start = time.time()
    steps = max(1, int(delay / 0.05))
    resumed_from = min(_resume_step(name), steps)
    await _maybe_hang(name)
    for step in range(resumed_from, steps):
        if checkpoint:
            activity.heartbeat({"step": step, "steps": steps})
        else:
            activity.heartbeat()
        _append(
            progress_path,
            {
                "activity": name,
                "key": key,
                "workflow": activity.info().workflow_id,
                "pid": os.getpid(),
                "attempt": activity.info().attempt,
                "step": step,
                "steps": steps,
                "resumed_from": resumed_from,
                "t": time.time(),
            },
        )
        await asyncio.sleep(delay / steps)
    if log_path:
        record = {
            "activity": name,
            "key": key,
            "workflow": activity.info().workflow_id,
            "pid": os.getpid(),
            "task_queue": activity.info().task_queue,
            "start": start,
            "end": time.time(),
            "attempt": activity.info().attempt,
            "activity_id": activity.info().activity_id,
            "resumed_from": resumed_from,
        }
        _append(log_path, record)


@activity.defn(name=names.PROPOSE_BUILTIN_GPU)
async def propose_builtin_gpu_double(inp: BuiltinProposeInput) -> BuiltinProposeResult:
    """The real built-in proposer (CPU code), recorded and heartbeating like the doubles.

    A CUDA campaign's forward target asks for it on the GPU queue
    (``builtin-forward-on-gpu``), so the GPU worker's concurrency checks see it too.
    With ``KERNELOPT_DOUBLES_PROPOSALS`` set, its answers are remembered there
    (``_remembered_proposal``).
    """
    await _work(names.PROPOSE_BUILTIN_GPU, inp.target.id)
    memo = os.environ.get("KERNELOPT_DOUBLES_PROPOSALS")
    if not memo:
        return await propose_builtin_on_gpu(inp)
    return await _remembered_proposal(Path(memo), inp)


async def _remembered_proposal(memo: Path, inp: BuiltinProposeInput) -> BuiltinProposeResult:
    """The real proposer's answer to ``inp``, computed once per test session.

    The proposer is deterministic in its input (content-addressed artifacts included),
    but each fresh GPU-doubles worker paid seconds importing torch for it; the fault
    tests start dozens.  The answer and its sources are kept in ``memo`` and the
    sources are put back into this worker's store.  The proposer's own behaviour is
    tested in tests/kernelopt/proposer and tests/workflows.
    """
    path = memo / f"{hashlib.sha256(inp.model_dump_json().encode()).hexdigest()}.json"
    store = open_store()
    if path.is_file():
        await resolve_scope(inp)  # as the real activity: a search's scope must load
        saved = json.loads(path.read_text())
        result = BuiltinProposeResult.model_validate(saved["result"])
        for variant in result.variants:
            ref = variant.source
            again = store.put_text(saved["sources"][ref.sha256], ref.media_type, ref.name)
            assert again == ref, (again, ref)
        return result
    result = await propose_builtin_on_gpu(inp)
    sources = {v.source.sha256: store.get_text(v.source) for v in result.variants}
    memo.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"result": result.model_dump(mode="json"), "sources": sources}))
    tmp.replace(path)
    return result


@activity.defn(name=names.COMPILE)
async def compile_double(inp: CompileInput) -> CompileResult:
    started = time.monotonic()
    await _work(names.COMPILE, inp.problem.name)
    failure = os.environ.get("KERNELOPT_DOUBLES_COMPILE_ERROR")
    if failure:  # the form activities/supervise.py gives a child's deterministic error
        error_type = failure.partition(": ")[0]
        message = f"{failure}\nTraceback (most recent call last):\n  (the double's)"
        held = os.environ.get("KERNELOPT_DOUBLES_COMPILE_HELD_S")
        held_s = float(held) if held else time.monotonic() - started
        raise ApplicationError(message, held_s, type=error_type, non_retryable=True)
    store = open_store()
    override = os.environ.get("KERNELOPT_DOUBLES_WRAPPER")
    wrapper_path = Path(override) if override else fixture_wrapper(inp.problem.path)
    wrapper = store.put_text(wrapper_path.read_text(), "text/x-python", "wrapper.py")
    blob = store.put_bytes(b"captured-args-placeholder-for-tests", name="args.pt")
    return stub_compiled(
        inp.problem,
        blob,
        "test-gpu",
        mode=inp.mode,
        cache_key=hashlib.sha256(inp.problem.source.sha256.encode()).hexdigest(),
        numerics="test-numerics",
        wrapper=wrapper,
        eager_ms=2.0,
        compiled_ms=1.0,
    )


@activity.defn(name=names.TRIAGE)
async def triage_double(inp: TriageInput) -> TriageResult:
    await _work(names.TRIAGE, inp.compiled.problem.name)
    return _triaged(inp)


@activity.defn(name=names.TRIAGE_TO_STORE)
async def triage_to_store_double(inp: TriageInput) -> TriageRef:
    """As the real one: the double's triage, stored, and its reference returned."""
    from kernelopt.compile.triage_store import store_triage

    await _work(names.TRIAGE_TO_STORE, inp.compiled.problem.name)
    return store_triage(_triaged(inp), open_store(), f"{inp.compiled.problem.name}.triage.json")


def _triaged(inp: TriageInput) -> TriageResult:
    from kernelopt.compile.segment_store import segment_of
    from kernelopt.compile.triage import summarize

    segment = segment_of(inp, open_store())  # as the real triage: inline or by reference
    timings = [
        KernelTiming(name=k.name, ms=0.2 + (_digest(k.name) % 5) / 10, is_library=False)
        for k in segment.kernels
    ]
    timings += [
        KernelTiming(name=f"{c.name}@{c.line}", ms=0.1, is_library=True)
        for c in segment.library_calls
    ]
    return summarize(timings, segment.targets, segment.mode, inp.gamma)


@activity.defn(name=names.PROFILE)
async def profile_double(inp: ProfileInput) -> ProfileResult:
    await resolve_scope(inp)  # as the real activity: a search's scope must load
    await _work(names.PROFILE, inp.target.id)
    return ProfileResult(
        profile=KernelProfile(source="events", note="test double", duration_us=12.0),
        analysis=Analysis(bottleneck=Bottleneck.MEMORY_BOUND, reasoning="test double"),
    )


@activity.defn(name=names.GATE_CANDIDATE)
async def gate_candidate_double(inp: CandidateGateInput) -> CandidateGateResult:
    """Deterministic verdicts: a third of candidates fail correctness; times from the hash.

    Like the real activity (``run_supervised``), the result carries the run time it held
    the GPU for (``device_seconds``), which the workflows charge to the GPU budget.
    """
    started = time.monotonic()
    await resolve_scope(inp)  # as the real activity: a search's scope must load
    result = await _gate_candidate_verdicts(inp)
    return result.model_copy(update={"device_seconds": time.monotonic() - started})


def _smoke(source: str) -> tuple[bool, float]:
    """What the gate double will say of ``source``: (correct, per-kernel ms if correct)."""
    h = _digest(source)
    if "SYNTAX_ERROR" in source or h % 3 == 0:
        return False, 0.0
    return True, 0.6 + (h % 50) / 100


def screening_estimate(candidate_id: str, ok: bool, ms: float, failure: str) -> ScreeningEstimate:
    """A screening double's estimate against a 1-ms baseline; ``failure`` is the note when not ok."""
    return ScreeningEstimate(
        candidate_id=candidate_id,
        smoke_ok=ok,
        smoke_note="" if ok else failure,
        estimated_ms=ms if ok else None,
        baseline_ms=1.0,
        estimated_speedup=1.0 / ms if ok else None,
    )


@activity.defn(name=names.SCREEN)
async def screen_double(inp: ScreenInput) -> ScreenResult:
    """Untrusted estimates from the per-kernel number the gate double will report.

    A candidate the gate double rejects fails the smoke check here (as a wrong
    kernel would on the real screening child), so a search gates it for its feedback.
    """
    started = time.monotonic()
    await resolve_scope(inp)  # as the real activity: a search's scope must load
    await _work(names.SCREEN, ",".join(c.candidate_id for c in inp.candidates))
    store = open_store()
    estimates = []
    for cand in inp.candidates:
        ok, ms = _smoke(store.get_text(cand.source))
        estimates.append(
            screening_estimate(
                cand.candidate_id, ok, ms, "output 0 differs from the baseline's (test double)"
            )
        )
    return ScreenResult(
        estimates=estimates, child_starts=1, device_seconds=time.monotonic() - started
    )


def stopped_at(candidate_id: str, passed: list[GateVerdict], **failed: Any) -> CandidateGateResult:
    """A gate double's result for a candidate that passed ``passed`` and then failed (or
    errored in) the gate ``GateVerdict(**failed)``."""
    return CandidateGateResult(candidate_id=candidate_id, verdicts=[*passed, GateVerdict(**failed)])


def stopped_at_static(
    candidate_id: str, status: GateStatus, reason: str, feedback: str
) -> CandidateGateResult:
    """A gate double's result for a candidate the static gate failed or errored on: the
    first gate, so no verdict comes before it."""
    return stopped_at(
        candidate_id, [], gate=GateName.STATIC, status=status, reason=reason, feedback=feedback
    )


def passed_all(
    candidate_id: str, verdicts: list[GateVerdict], kernel_ms: float
) -> CandidateGateResult:
    """A gate double's result for a candidate every gate passed; the doubles' baseline
    kernel always takes 1 ms, so ``kernel_ms`` is also the inverse speedup."""
    return CandidateGateResult(
        candidate_id=candidate_id, verdicts=verdicts, kernel_ms=kernel_ms, baseline_kernel_ms=1.0
    )


async def _gate_candidate_verdicts(inp: CandidateGateInput) -> CandidateGateResult:
    await _work(names.GATE_CANDIDATE, inp.candidate_id)
    source = open_store().get_text(inp.source)
    ok, ms = _smoke(source)
    static = GateVerdict(gate=GateName.STATIC, status=GateStatus.PASS, reason="imports and runs")
    if "SYNTAX_ERROR" in source:
        return stopped_at_static(
            inp.candidate_id,
            GateStatus.FAIL,
            "does not compile",
            "SyntaxError: invalid syntax (test double)",
        )
    if not ok:
        return stopped_at(
            inp.candidate_id,
            [static],
            gate=GateName.CORRECTNESS,
            status=GateStatus.FAIL,
            reason="max abs error 3.1e-2 > 1e-3 at seed 1",
            metrics={"max_abs_error": 3.1e-2, "seed": 1},
            thresholds={"rtol": inp.rtol, "atol": inp.atol},
            feedback="output differs from the reference (test double)",
        )
    right = GateVerdict(
        gate=GateName.CORRECTNESS,
        status=GateStatus.PASS,
        reason="3 seeds within 1e-3",
        metrics={"max_abs_error": 1e-6},
    )
    return passed_all(inp.candidate_id, [static, right], ms)


@activity.defn(name=names.RESTITCH)
async def restitch_double(inp: RestitchInput) -> RestitchResult:
    from kernelopt.compile.restitch import forward_wrapper, restitch_source
    from kernelopt.compile.segment_store import segment_of

    # one distinct call per replacement set: the same targets with a runner-up's source differ
    sources = "+".join(r.source.sha256[:8] for r in inp.replacements)
    await _work(names.RESTITCH, ",".join(r.target.id for r in inp.replacements) + f"@{sources}")
    error = os.environ.get("KERNELOPT_DOUBLES_RESTITCH_ERROR")
    if error:  # as the real activity reports a model that raises on the captured arguments
        raise ApplicationError(error, type="RestitchRunError", non_retryable=True)
    store = open_store()
    base = store.get_text(inp.compiled.wrapper)
    forward = [r for r in inp.replacements if r.target.kind == TargetKind.FORWARD]
    if forward:
        text = forward_wrapper(inp.compiled, store.get_text(forward[0].source))
    else:
        pairs = [(r.target, store.get_text(r.source)) for r in inp.replacements]
        text, _ = restitch_source(base, segment_of(inp, store), pairs)
    ref = store.put_text(text, "text/x-python", "restitched.py")
    return RestitchResult(wrapper=ref, replaced=[r.target.id for r in inp.replacements])


@activity.defn(name=names.GATE_MODEL)
async def gate_model_double(inp: ModelGateInput) -> ModelGateResult:
    """Passes at 1.04-1.13x.

    KERNELOPT_DOUBLES_MODEL_GATE=quarantine: V_perf never settles; ``fail-once:MARKER``:
    the first re-stitched model fails V_model (rho 133, like the biased kernel on the H200).
    """
    await _work(names.GATE_MODEL, inp.wrapper.sha256[:12])
    if inp.source_kind == "forward" and "class ModelNew" not in open_store().get_text(inp.wrapper):
        raise ApplicationError("a forward-kind model gate got no ModelNew", non_retryable=True)
    speedup = 1.04 + (_digest(inp.wrapper.sha256) % 10) / 100
    mode = os.environ.get("KERNELOPT_DOUBLES_MODEL_GATE", "")
    if mode.startswith("fail-once:"):
        try:
            os.close(os.open(mode.split(":", 1)[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass  # an earlier model already failed: this one passes
        else:
            wrong = GateVerdict(
                gate=GateName.MODEL,
                status=GateStatus.FAIL,
                reason="rho 133 > 10 (d_opt 1.6e-4, d_ref 1.2e-6)",
            )
            return ModelGateResult(verdict=wrong)
    if mode == "quarantine":
        noisy = GateVerdict(
            gate=GateName.PERFORMANCE,
            status=GateStatus.QUARANTINE,
            reason=f"timing not stable: spread 24.1% after 6 rounds (limit 10%); {speedup:.3g}x",
        )
        return ModelGateResult(verdict=noisy, category=PerfCategory.MATCHED, speedup=speedup)
    verdict = GateVerdict(
        gate=GateName.PERFORMANCE,
        status=GateStatus.PASS,
        reason=f"{speedup:.3f}x >= gamma {inp.gamma}",
        metrics={"speedup": speedup, "rho": 1.2},
        thresholds={"gamma": inp.gamma, "rho_max": inp.rho_max},
    )
    return ModelGateResult(
        verdict=verdict,
        category=PerfCategory.OPTIMIZED,
        speedup=speedup,
        baseline_ms=1.0,
        candidate_ms=1.0 / speedup,
    )


GPU_DOUBLES = [
    propose_builtin_gpu_double,
    compile_double,
    triage_double,
    triage_to_store_double,
    profile_double,
    gate_candidate_double,
    screen_double,
    restitch_double,
    gate_model_double,
]
