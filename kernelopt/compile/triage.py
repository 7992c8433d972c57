"""Triage: how much of the model can Triton work touch at all (docs/method.md#ceiling)?

If library calls take a fraction f of the model's GPU time and stay as they
are, making the Triton remainder S times faster gives at most
``1 / (f + (1 - f) / S)``; reaching the perf gate's gamma needs
``S = (1 - f) / (1/gamma - f)``, impossible once f >= 1/gamma.  Measuring f
before spending GPU-hours is the cheapest decision in a campaign.

Measurement: the baseline wrapper runs on the captured arguments under the
PyTorch profiler; every GPU kernel record whose name is one of the wrapper's
Triton kernels is Triton time, everything else (cuBLAS/cuDNN kernels,
ATen fallbacks, memcpy/memset) is library time -- both measured in context,
in the same runs.  Each Triton kernel is also timed alone on its captured
arguments (``harness.KernelHarness``) for reference.

In single-kernel mode the whole forward is the target, library call included,
so nothing is frozen: the ceiling uses f = 0 and the verdict is always
"worth searching"; the measured f is still reported.

Targets are searched largest share first, except that one whose bandwidth
headroom (its time over its bytes-moved floor at the device's peak bandwidth)
is below the speedup the forward needs of it goes after every target with
headroom: it cannot reach gamma alone without moving fewer bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kernelopt.contracts import data_movement
from kernelopt.contracts.compiled import (
    CompileResult,
    KernelTiming,
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetHeadroom,
    TargetKind,
    TriageInput,
    TriageResult,
)
from kernelopt.contracts.target_cutoff import (
    DEFAULT_COVERAGE,
    DEFAULT_MIN_SHARE,
    select_targets,
)
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore

log = get_logger(__name__)

SPEEDUPS = (("2", 2.0), ("5", 5.0), ("10", 10.0), ("inf", math.inf))
# JSON (and so Temporal payloads) has no infinity: an unbounded ceiling (f = 0, S = inf)
# is reported as this cap.
CEILING_CAP = 1e6


def ceiling(f: float, s: float) -> float:
    """Amdahl: model speedup when the non-library fraction (1 - f) gets s times faster."""
    denom = f + (0.0 if math.isinf(s) else (1.0 - f) / s)
    return CEILING_CAP if denom <= 1.0 / CEILING_CAP else min(CEILING_CAP, 1.0 / denom)


def ceilings(f: float) -> dict[str, float]:
    return {key: ceiling(f, s) for key, s in SPEEDUPS}


def frozen_fraction(f: float, mode: SearchMode | None) -> float:
    """The library fraction Amdahl's ceiling must use: single-kernel mode freezes nothing."""
    return 0.0 if mode == SearchMode.SINGLE else f


def required_speedup(f: float, gamma: float) -> float | None:
    """Triton speedup needed for a model speedup of gamma; None if impossible (f >= 1/gamma)."""
    denom = 1.0 / gamma - f
    if denom <= 0 or f >= 1.0:
        return None
    return (1.0 - f) / denom


def verdict(
    f: float, gamma: float, max_required: float, mode: SearchMode
) -> tuple[str, str, float | None]:
    """(verdict, reason, required speedup)."""
    if mode == SearchMode.SINGLE:
        return (
            "worth_searching",
            f"single-kernel mode: the whole forward is the target (measured f = {f:.3f} is not "
            "frozen)",
            required_speedup(0.0, gamma),
        )
    need = required_speedup(f, gamma)
    if need is None:
        return (
            "library_dominated",
            f"f = {f:.3f} >= 1/gamma = {1 / gamma:.3f}: no Triton speedup reaches gamma = {gamma}",
            None,
        )
    if need > max_required:
        return (
            "library_dominated",
            f"f = {f:.3f}: Triton work must get {need:.1f}x faster to reach gamma = {gamma} "
            f"(more than {max_required:g}x)",
            need,
        )
    return (
        "worth_searching",
        f"f = {f:.3f}: a {need:.2f}x faster Triton remainder reaches gamma = {gamma}",
        need,
    )


def target_headroom(
    target: SearchTarget,
    ms: float,
    floor_bytes: int,
    bandwidth_gbs: float | None,
    gamma: float,
) -> TargetHeadroom:
    """The target's bandwidth headroom and required speedup, and why it ranks last if short."""
    headroom = data_movement.bandwidth_headroom(ms, floor_bytes, bandwidth_gbs)
    required = data_movement.required_speedup(target.share, gamma)
    short = data_movement.short_of_headroom(headroom, required)
    reason = ""
    if short and headroom is not None and required is not None:
        reason = data_movement.headroom_reason(headroom, required, gamma)
    return TargetHeadroom(
        target=target.id,
        ms=ms,
        floor_bytes=floor_bytes,
        headroom=headroom,
        required=required,
        short=short,
        reason=reason,
    )


def headroom_first(
    ranked: list[SearchTarget], rooms: Mapping[str, TargetHeadroom]
) -> list[SearchTarget]:
    """``ranked`` with every target short of headroom moved after the rest, each in its order."""
    short = {t.id for t in ranked if t.id in rooms and rooms[t.id].short}
    return [t for t in ranked if t.id not in short] + [t for t in ranked if t.id in short]


def _judged(room: TargetHeadroom) -> bool:
    """Whether the rule could judge the target: a known floor and a reachable requirement.

    A target too small to reach gamma alone is not judged (its gain counts beside
    others'); that keeps the records few: shares over 1 - 1/gamma are a handful.
    """
    return room.headroom is not None and room.required is not None


def headroom_rule(bandwidth_gbs: float | None, judged: list[TargetHeadroom]) -> str:
    """The headroom rule in words, with how many targets it moved, or why it is off."""
    if not bandwidth_gbs:
        return "not judged: the device's peak bandwidth is unknown, so targets stay in share order"
    short = sum(r.short for r in judged)
    return (
        f"a target whose time over its bytes-moved floor at {bandwidth_gbs:.0f} GB/s is below "
        "the speedup the forward needs of it is searched after every target with headroom: "
        f"{short} of the {len(judged)} targets large enough to reach gamma alone"
    )


def summarize(
    per_kernel: list[KernelTiming],
    targets: list[SearchTarget],
    mode: SearchMode,
    gamma: float = 1.03,
    max_required: float = 10.0,
    wall_ms: float | None = None,
    method: str = "",
    coverage: float = DEFAULT_COVERAGE,
    min_share: float = DEFAULT_MIN_SHARE,
    floor_bytes: Mapping[str, int] | None = None,
    bandwidth_gbs: float | None = None,
) -> TriageResult:
    """The triage result from per-kernel times (pure arithmetic; tested on the CPU).

    Targets are ranked by share and cut (``select_targets``); within the searched
    and the deferred targets, those short of bandwidth headroom then go last
    (``floor_bytes``: each target's bytes-moved floor by id; without it or
    ``bandwidth_gbs`` the share order stands).
    """
    library_ms = sum(k.ms for k in per_kernel if k.is_library)
    triton_ms = sum(k.ms for k in per_kernel if not k.is_library)
    total = library_ms + triton_ms
    f = library_ms / total if total > 0 else 0.0
    effective_f = frozen_fraction(f, mode)
    label, reason, need = verdict(f, gamma, max_required, mode)
    by_name = {k.name: k.ms for k in per_kernel if not k.is_library}
    ranked = _by_share(targets, by_name, total)
    cut = select_targets(ranked, by_name, total, coverage, min_share)
    floors = floor_bytes or {}
    rooms = {
        t.id: target_headroom(
            t, _target_ms(t, by_name, total), floors.get(t.id, 0), bandwidth_gbs, gamma
        )
        for t in ranked
    }
    searched = headroom_first(cut.searched, rooms)
    deferred = headroom_first(cut.deferred, rooms)
    judged = [rooms[t.id] for t in [*searched, *deferred] if _judged(rooms[t.id])]
    return TriageResult(
        total_ms=total,
        library_ms=library_ms,
        triton_ms=triton_ms,
        library_fraction=f,
        ceilings=ceilings(effective_f),
        required_speedup=need,
        verdict=label,
        per_kernel=sorted(per_kernel, key=lambda k: -k.ms),
        targets=searched,
        deferred_targets=[t.id for t in deferred],
        deferred_share=cut.deferred_share,
        cutoff=cut.rule,
        gamma=gamma,
        verdict_reason=reason,
        mode=mode,
        wall_ms=wall_ms,
        method=method,
        bandwidth_gbs=bandwidth_gbs,
        headroom_rule=headroom_rule(bandwidth_gbs, judged),
        headroom=judged,
    )


def _by_share(
    targets: list[SearchTarget], kernel_ms: Mapping[str, float], total: float
) -> list[SearchTarget]:
    """The targets with their share of the forward's GPU time, largest first (the forward: 1)."""
    ranked = []
    for target in targets:
        if target.kind == TargetKind.FORWARD:
            share = 1.0
        else:
            share = _target_ms(target, kernel_ms, total) / total if total else 0.0
        ranked.append(target.model_copy(update={"share": share}))
    return sorted(ranked, key=lambda t: (-t.share, t.id))


def _target_ms(target: SearchTarget, kernel_ms: Mapping[str, float], total: float) -> float:
    """The target's GPU time per forward: the whole forward's, or its kernels' summed."""
    if target.kind == TargetKind.FORWARD:
        return total
    return sum(kernel_ms.get(name, 0.0) for name in target.kernels)


def floor_bytes_by_target(compiled: CompileResult, segment: SegmentResult) -> dict[str, int]:
    """Each target's bytes-moved floor (read + written), as the prompt facts state it."""
    return {t.id: sum(data_movement.target_bytes(compiled, segment, t)) for t in segment.targets}


def device_bandwidth_gbs() -> float | None:
    """The current CUDA device's peak DRAM bandwidth; None where CUDA does not report it."""
    import torch

    return data_movement.device_bandwidth_gbs(
        torch.cuda.get_device_properties(torch.cuda.current_device())
    )


PROFILER_METHOD = (
    "torch.profiler CUDA kernel records over 10 forwards of the baseline wrapper on the captured "
    "args (Triton = records named like the wrapper's Triton kernels, library = every other GPU "
    "record); standalone_ms: each Triton kernel alone on its captured args, do_bench median"
)
EVENT_METHOD = (
    "CUDA events around every wrapper statement over 10 forwards (the profiler gave no kernel "
    "records); standalone_ms: each Triton kernel alone on its captured args, do_bench median"
)


def triage(inp: TriageInput, store: ArtifactStore) -> TriageResult:
    """Activity entry point: per-kernel GPU time of the baseline wrapper, f, ceiling, verdict."""
    from kernelopt.stages import StageClock

    stages = StageClock()
    from kernelopt.checkpoint import report
    from kernelopt.compile.runtime import (
        load_tensors,
        load_wrapper_module,
        pin_configs,
        prepare_wrapper_process,
        run_call,
    )
    from kernelopt.compile.segment_store import segment_of
    from kernelopt.compile.standalone_kernels import KernelHarness
    from kernelopt.compile.statement_timing import event_times
    from kernelopt.compile.timing import bench_ms, profile_kernels

    stages.lap("imports")  # torch and Inductor: outside the process's import_target
    prepare_wrapper_process()  # TF32 off: profile the program the gates time
    stages.lap("cuda_init")
    compiled = inp.compiled
    segment = segment_of(inp, store)  # before any GPU work: a missing one is the input's fault
    module = load_wrapper_module(
        store.get_text(compiled.wrapper), f"{compiled.problem.name}_baseline"
    )
    pin_configs(module, dict(compiled.kernel_configs))
    args = load_tensors(store, compiled.args, "cuda")
    stages.lap("load")

    def fn() -> object:
        return run_call(module, args)

    # the wall time before the profiler touches the process: measured after it, a
    # launch-bound forward read slower here than in gate 4 (docs/TEAM_NOTES.md)
    wall = bench_ms(fn)
    stages.lap("wall")
    report({"step": "profile"})
    triton_names = {k.name for k in segment.kernels}
    profile = profile_kernels(fn)
    method = PROFILER_METHOD
    library_names: set[str] = set()
    if not profile or not (triton_names <= set(profile)):
        # no CUPTI records (some sandboxes): CUDA events around every wrapper statement
        timed = event_times(compiled, store, args)
        profile = {name: (ms, count) for name, (ms, count, _) in timed.items()}
        library_names = {name for name, (_, _, is_lib) in timed.items() if is_lib}
        method = EVENT_METHOD
    stages.lap("profile")
    standalone: dict[str, float] = {}
    if inp.standalone and triton_names:
        report({"step": "standalone"})
        harness = KernelHarness(compiled, store, args=args)
        for name in sorted(triton_names):
            if name in harness.launches:
                standalone[name] = harness.time_ms(name)
        stages.lap("standalone")
    per_kernel = [
        KernelTiming(
            name=name,
            ms=ms,
            is_library=name not in triton_names or name in library_names,
            launches=count,
            standalone_ms=standalone.get(name),
        )
        for name, (ms, count) in profile.items()
    ]
    for name in sorted(triton_names - set(profile)):
        per_kernel.append(
            KernelTiming(name=name, ms=0.0, is_library=False, standalone_ms=standalone.get(name))
        )
    result = summarize(
        per_kernel,
        segment.targets,
        segment.mode,
        inp.gamma,
        inp.max_required_speedup,
        wall_ms=wall,
        method=method,
        coverage=inp.coverage,
        min_share=inp.min_share,
        floor_bytes=floor_bytes_by_target(compiled, segment),
        bandwidth_gbs=device_bandwidth_gbs(),
    )
    log.info(
        "triaged",
        problem=compiled.problem.name,
        f=round(result.library_fraction, 4),
        verdict=result.verdict,
        total_ms=round(result.total_ms, 4),
        searched=len(result.targets),
        deferred=len(result.deferred_targets),
        short_of_headroom=sum(r.short for r in result.headroom),
        **stages.seconds,
    )
    return result.model_copy(update={"stage_seconds": stages.seconds})
