"""The numbers a prompt states about its target, computed from contracts alone.

``build_facts`` reads only pydantic contracts (no store, no torch), so a
workflow may call it deterministically and pass the result to the planner and
executor (``PlanInput.facts`` / ``ExecuteInput.facts``).  The numbers are
the project's own: triage's per-kernel GPU time, the segment's launch records,
the gates' tolerances.  Nothing here knows a problem by name.
"""

from __future__ import annotations

import re
from typing import Any

from kernelopt.contracts.compiled import (
    CompileResult,
    KernelArg,
    SearchTarget,
    SegmentResult,
    TargetKind,
    TriageResult,
    TritonKernel,
)
from kernelopt.contracts.data_movement import required_speedup, target_bytes
from kernelopt.contracts.search import Hardware, InductorKernelFact, PromptFacts
from kernelopt.contracts.verdicts import GateSettings
from kernelopt.roofline import ceilings_for

_DEVICE_PROPS = re.compile(r"DeviceProperties\(([^)]*)\)")
_BUFFER = re.compile(r"\bbuf\d+\b")
# the autotune candidates a kernel's decorator lists, at most this many shown
_MAX_CANDIDATES = 6


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


def _sites(kernel: TritonKernel) -> list[tuple[int, str, list[KernelArg]]]:
    """A kernel's launches as (line, site, arguments); an older record keeps only its first."""
    if kernel.launches:
        return [(launch.line, launch.site, launch.args) for launch in kernel.launches]
    return [(kernel.launch_line, kernel.launch_site, [])]


def _launches(segment: SegmentResult, names: list[str]) -> tuple[list[str], str]:
    lines: list[str] = []
    grids: list[str] = []
    for kernel in segment.kernels:
        if kernel.name not in names:
            continue
        lines.extend(f"line {line}: {site}" for line, site, _args in _sites(kernel))
        if kernel.grid:
            grids.append(kernel.grid if len(names) == 1 else f"{kernel.name}: {kernel.grid}")
    return lines, "; ".join(grids)


def _required_note(share: float | None, required: float | None, gamma: str) -> str:
    if share is None:
        return "share not measured: run triage"
    if required is None:
        return (
            f"unreachable: the target is {share:.1%} of the forward, so even an infinitely "
            f"fast replacement gives at most {1 / (1 - share):.3f}x < gamma {gamma}"
            if share < 1.0
            else "unreachable"
        )
    return f"Amdahl: 1 / ((1 - {share:.3f}) + {share:.3f} / S) >= {gamma}"


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
    required_note = _required_note(share, required, str(gamma))
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


HOST_MARGIN = 1.10  # a dispatched forward this far above its kernels' GPU time is host-bound


def _judged_forward(facts: PromptFacts, compiled: CompileResult, target: SearchTarget) -> dict:
    """The share and required speedup against the forward gate 4 judges, when launch and host
    time make it much longer than its kernels' GPU time (small, many-kernel forwards).

    Gate 4 times the forward called from Python, so a target's kernels are a smaller part of
    it than of the GPU time, and Amdahl on the GPU time promises too little.
    """
    dispatched, forward = compiled.wrapper_ms, facts.forward_ms
    if (
        target.kind == TargetKind.FORWARD
        or not dispatched
        or not forward
        or facts.baseline_ms is None
        or dispatched < forward * HOST_MARGIN
    ):
        return {}
    share = min(1.0, facts.baseline_ms / dispatched)
    return {
        "dispatched_ms": dispatched,
        "share": share,
        "required_speedup": required_speedup(share, facts.gamma),
    }


def with_context(
    facts: PromptFacts,
    compiled: CompileResult,
    whole: SegmentResult,
    target: SearchTarget,
    triage: TriageResult | None = None,
) -> PromptFacts:
    """``facts`` with the worker's software versions, a kernel target's chosen launch config,
    the target's neighbours in the forward and the forward's launch and host time.

    Kept apart from ``build_facts`` so the facts a workflow builds (and passes to its
    activities) stay as recorded; activities and the CLI add these.  ``whole`` is the
    unscoped segmentation: a target's scoped part has no neighbours.
    """
    kernels = {k.name: k for k in whole.kernels}
    facts = facts.model_copy(update=_judged_forward(facts, compiled, target))
    configs: list[str] = []
    if target.kind == TargetKind.KERNEL and target.kernels and target.kernels[0] in kernels:
        name = target.kernels[0]
        configs = config_lines(compiled.kernel_configs.get(name), kernels[name].config)
    return facts.model_copy(
        update={
            "torch_version": compiled.torch_version or None,
            "triton_version": compiled.triton_version or None,
            "launch_configs": configs,
            "neighbours": neighbour_lines(whole, target, triage),
            # gamma with the 3 decimals of every other ratio, so no two ratios round alike
            "required_note": _required_note(
                facts.share, facts.required_speedup, f"{facts.gamma:.3f}"
            ),
        }
    )


def config_lines(
    chosen: dict[str, Any] | None, decorator: dict[str, Any] | None = None
) -> list[str]:
    """A kernel target's chosen Inductor config in one line, and its listed autotune
    candidates in another when the decorator lists them.

    The chosen config is the one the compile recorded from the autotuner; without it the
    line says it is unknown, so a model does not re-tune toward a guessed baseline point.
    """
    decorator = decorator or {}
    if chosen:
        lines = [f"- Inductor's chosen config: {_config(chosen)} (autotuned at compile)"]
    elif "num_warps" in decorator or "num_stages" in decorator:
        fixed = {k: decorator[k] for k in ("num_warps", "num_stages") if k in decorator}
        lines = [f"- Inductor's config: {_config(fixed)} (its decorator)"]
    else:
        lines = ["- Inductor's chosen config: not recorded by the compile (unknown)"]
    candidates = decorator.get("configs")
    if isinstance(candidates, list) and candidates and all(isinstance(c, dict) for c in candidates):
        shown = "; ".join(_config(c) for c in candidates[:_MAX_CANDIDATES])
        more = len(candidates) - _MAX_CANDIDATES
        lines.append(
            f"- its autotune candidates: {shown}" + (f" (+{more} more)" if more > 0 else "")
        )
    return lines


def _config(config: dict[str, Any]) -> str:
    kwargs = config.get("kwargs", {})
    items = {**(kwargs if isinstance(kwargs, dict) else {}), **config}
    items.pop("kwargs", None)
    return ", ".join(f"{key}={value}" for key, value in items.items())


def neighbour_lines(
    whole: SegmentResult, target: SearchTarget, triage: TriageResult | None = None
) -> list[str]:
    """The launches just before and just after a kernel target's, in the forward's order.

    They wrote its inputs or read its outputs when a buffer is shared (named); the line
    lets a model reason about L2 reuse and fusion without guessing.  Forward targets: none.
    """
    if target.kind == TargetKind.FORWARD or not target.kernels:
        return []
    order = _launch_order(whole)
    mine = [i for i, (_line, name, _lib, _args) in enumerate(order) if name in target.kernels]
    if not mine:
        return []
    buffers = _buffers(a for _l, n, _b, args in order if n in target.kernels for a in args)
    times = _kernel_ms(triage)
    before = order[mine[0] - 1] if mine[0] > 0 else None
    after = order[mine[-1] + 1] if mine[-1] + 1 < len(order) else None
    return [
        _neighbour("producer (launched just before)", before, buffers, times, "start"),
        _neighbour("consumer (launched just after)", after, buffers, times, "end"),
    ]


_Launch = tuple[int, str, bool, list[str]]  # line, name, is a library call, argument texts


def _launch_order(segment: SegmentResult) -> list[_Launch]:
    out: list[_Launch] = []
    for kernel in segment.kernels:
        out.extend(
            (line, kernel.name, False, _arg_texts(args, site))
            for line, site, args in _sites(kernel)
        )
    out.extend((c.line, c.name, True, [c.statement]) for c in segment.library_calls)
    return sorted(out, key=lambda launch: launch[0])


def _arg_texts(args: list[KernelArg], site: str) -> list[str]:
    return [a.expr for a in args if a.expr] or [site]


def _buffers(texts: Any) -> set[str]:
    return {b for text in texts for b in _BUFFER.findall(text)}


def _neighbour(
    what: str, launch: _Launch | None, buffers: set[str], times: dict[str, float], edge: str
) -> str:
    if launch is None:
        return f"- {what}: none (the target is at the forward's {edge})"
    _line, name, library, args = launch
    kind = "library call" if library else "Triton kernel"
    ms = times.get(name)
    untimed = "not timed per call" if library else "not timed"
    timed = f"{ms * 1000:.2f} us per forward" if ms is not None else untimed
    shared = sorted(_buffers(args) & buffers, key=lambda b: int(b[3:]))
    via = f"; shares {', '.join(shared)}" if shared else "; shares no buffer by name"
    return f"- {what}: `{name}` ({kind}, {timed}{via})"
