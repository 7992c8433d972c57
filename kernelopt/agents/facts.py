"""The numbers a prompt states about its target, computed from contracts alone.

``build_facts`` reads only pydantic contracts (no store, no torch), so a
workflow may call it deterministically and pass the result to the planner and
executor (``PlanInput.facts`` / ``ExecuteInput.facts``).  The numbers are
the project's own: triage's per-kernel GPU time, the segment's launch records,
the gates' tolerances.  Nothing here knows a problem by name.
"""

from __future__ import annotations

import re

from kernelopt.contracts.compiled import (
    CompileResult,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TriageResult,
)
from kernelopt.contracts.data_movement import required_speedup, target_bytes
from kernelopt.contracts.search import Hardware, InductorKernelFact, PromptFacts
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.roofline import ceilings_for

_DEVICE_PROPS = re.compile(r"DeviceProperties\(([^)]*)\)")


def stand_in_hardware(gpu_name: str, wrapper_text: str = "") -> Hardware:
    """Hardware facts without a GPU (CPU fixtures, ``kernelopt prompt``), each source named.

    Name: the compile record; SM count and compute capability: Inductor's
    ``DeviceProperties`` in the wrapper (written on the GPU at compile time);
    bandwidth and L2: the roofline table of measured copy bandwidths (kernelopt/roofline.py).
    """
    sm_count: int | None = None
    capability = ""
    match = _DEVICE_PROPS.search(wrapper_text)
    if match:
        fields = dict(
            part.strip().split("=", 1) for part in match.group(1).split(",") if "=" in part
        )
        if fields.get("multi_processor_count", "").isdigit():
            sm_count = int(fields["multi_processor_count"])
        if fields.get("major", "").isdigit() and "cc" in fields:
            capability = f"{fields['major']}.{int(fields['cc']) % 10}"
    known = ceilings_for(gpu_name) if gpu_name else None
    parts = ["name from the compile record"]
    if match:
        parts.append("SM count from Inductor's DeviceProperties")
    if known is not None:
        parts.append("bandwidth (measured copy) and L2 from kernelopt/roofline.py")
    return Hardware(
        name=gpu_name or "unknown GPU",
        sm_count=sm_count,
        bandwidth_gbs=known.copy_bandwidth_gbs if known else None,
        l2_bytes=known.l2_bytes if known and known.l2_bytes else None,
        compute_capability=capability,
        source="stand-in: " + ", ".join(parts),
    )


def _kernel_ms(triage: TriageResult | None) -> dict[str, float]:
    if triage is None:
        return {}
    return {k.name: k.ms for k in triage.per_kernel if not k.is_library}


def _launches(segment: SegmentResult, names: list[str]) -> tuple[list[str], str]:
    lines: list[str] = []
    grids: list[str] = []
    for kernel in segment.kernels:
        if kernel.name not in names:
            continue
        sites = kernel.launches or []
        if sites:
            lines.extend(f"line {launch.line}: {launch.site}" for launch in sites)
        else:
            lines.append(f"line {kernel.launch_line}: {kernel.launch_site}")
        if kernel.grid:
            grids.append(kernel.grid if len(names) == 1 else f"{kernel.name}: {kernel.grid}")
    return lines, "; ".join(grids)


def build_facts(
    compiled: CompileResult,
    segment: SegmentResult,
    target: SearchTarget,
    triage: TriageResult | None = None,
    hardware: Hardware | None = None,
    gates: GateSettings | None = None,
) -> PromptFacts:
    """The target's prompt facts; absent measurements stay None and say so in the notes."""
    settings = gates or GateSettings()
    gamma = triage.gamma if triage is not None else settings.gamma
    times = _kernel_ms(triage)
    forward_ms = triage.total_ms if triage is not None else compiled.wrapper_ms
    if target.kind == TargetKind.FORWARD:
        baseline_ms = forward_ms
        note = "triage: the whole forward's GPU time" if triage else "compile: wrapper call() time"
        share: float | None = 1.0
        bytes_note = "inputs + parameters read once, Triton kernels' final outputs written once"
    else:
        measured = [times[k] for k in target.kernels if k in times]
        baseline_ms = sum(measured) if measured else None
        note = "triage: GPU time per forward" if measured else "not measured (no triage)"
        share = target.share or (
            baseline_ms / forward_ms if baseline_ms is not None and forward_ms else None
        )
        bytes_note = "every tensor argument read (in) or written (out) once"
    bytes_in, bytes_out = target_bytes(compiled, segment, target)
    required = required_speedup(share, gamma) if share else None
    if share is None:
        required_note = "share not measured: run triage"
    elif required is None:
        required_note = (
            f"unreachable: the target is {share:.1%} of the forward, so even an infinitely "
            f"fast replacement gives at most {1 / (1 - share):.3f}x < gamma {gamma}"
            if share < 1.0
            else "unreachable"
        )
    else:
        required_note = f"Amdahl: 1 / ((1 - {share:.3f}) + {share:.3f} / S) >= {gamma}"
    kernels: list[InductorKernelFact] = []
    if target.kind == TargetKind.FORWARD:
        for kernel in segment.kernels:
            launch, grid = _launches(segment, [kernel.name])
            kernels.append(
                InductorKernelFact(
                    name=kernel.name,
                    source=kernel.source,
                    ms=times.get(kernel.name),
                    launch=launch[0] if launch else "",
                    grid=grid,
                )
            )
        kernels.sort(key=lambda k: -(k.ms or 0.0))  # stable: program order among equals
    dominant = kernels[0].name if kernels and kernels[0].ms else ""
    launches, grid = _launches(segment, list(target.kernels))
    if target.kind == TargetKind.FORWARD:
        launches, grid = [], ""
    return PromptFacts(
        hardware=hardware,
        baseline_ms=baseline_ms,
        baseline_note=note,
        forward_ms=forward_ms,
        share=share,
        gamma=gamma,
        required_speedup=required,
        required_note=required_note,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        bytes_note=bytes_note,
        launches=launches,
        grid=grid,
        rtol=settings.rtol,
        atol=settings.atol,
        model_tolerance=settings.model_tolerance,
        rho_max=settings.rho_max,
        inductor_kernels=kernels,
        dominant_kernel=dominant,
    )
