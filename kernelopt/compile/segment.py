"""Segmentation: the compiled wrapper as a structured artifact (docs/method.md#dispatch-aware-search).

Every library call is recorded and frozen (``needs_triton_replacement=False``);
every Triton kernel is exposed with its source, launch sites and the
arguments as actually launched; runs of adjacent Triton launches with no
library call between them become fusion candidates.  Pure text work: runs on
CPU machines from committed fixtures.
"""

from __future__ import annotations

import ast

from kernelopt.compile.mode import select_mode
from kernelopt.compile.wrapper_parse import (
    Event,
    ParsedWrapper,
    _Scanner,
    _Source,
    arg_role,
    parse_wrapper,
    triton_dtype,
)
from kernelopt.contracts.compiled import (
    CompileResult,
    FusionGroup,
    KernelArg,
    KernelLaunch,
    LibraryCall,
    SearchMode,
    SearchTarget,
    SegmentInput,
    SegmentResult,
    TargetKind,
    TensorSpec,
    TritonKernel,
)
from kernelopt.log import get_logger
from kernelopt.store import ArtifactStore

log = get_logger(__name__)

FORWARD_TARGET_ID = "forward"


# Typing a launch's arguments only resolves expressions against the parsed buffers, so
# the scanner gets no source: indexing the wrapper's bytes for every launch made
# segmentation quadratic in the wrapper's size (tens of seconds at a few hundred kernels).
_NO_SOURCE = _Source("")


def _scanner_for(parsed: ParsedWrapper) -> _Scanner:
    scanner = _Scanner(_NO_SOURCE, parsed.kernels, set(parsed.other_kernels))
    scanner.buffers = parsed.buffers
    return scanner


def launch_args(parsed: ParsedWrapper, event: Event) -> list[KernelArg]:
    """The positional arguments of one launch, typed by the kernel's signature."""
    kernel = parsed.kernels[event.name]
    scanner = _scanner_for(parsed)
    out: list[KernelArg] = []
    for i, (expr, node) in enumerate(zip(event.args, event.arg_nodes, strict=False)):
        if i < len(kernel.params):
            param = kernel.params[i]
            ptype = kernel.param_types.get(param, "")
            role = arg_role(param, ptype)
        else:
            param, ptype, role = f"grid{i - len(kernel.params)}", "", "grid"
        value = None
        tensor = None
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            value = node.value
            if role not in ("grid",):
                role = "scalar"
        else:
            spec = scanner.spec_of_expr(node)
            if spec is not None and spec.shape is not None and spec.stride is not None:
                dtype = spec.dtype or triton_dtype(ptype) or "unknown"
                tensor = TensorSpec(shape=spec.shape, stride=spec.stride, dtype=dtype)
            elif ptype.startswith("*"):
                tensor = None  # a tensor whose layout the text does not state
        out.append(KernelArg(name=param, tensor=tensor, value=value, expr=expr, role=role))
    return out


def _grid_text(parsed: ParsedWrapper, event: Event, args: list[KernelArg]) -> str:
    kernel = parsed.kernels[event.name]
    if "grid" in event.kwargs:
        return event.kwargs["grid"]
    grid_vals = [a.expr for a in args if a.role == "grid"]
    if grid_vals:
        return f"({', '.join(grid_vals)})"
    grid_type = kernel.config.get("inductor_meta", {}).get("grid_type", "")
    numels = [f"{a.name}={a.expr}" for a in args if a.name.endswith("numel")]
    return f"{grid_type or 'grid'}({', '.join(numels)})"


def group_signature(parsed: ParsedWrapper, events: list[Event]) -> list[KernelArg]:
    """What a fused candidate's ``launch(*args)`` receives: the union of the group's tensor args.

    In order of first appearance, deduplicated by expression; scalars (numels)
    and grid values are dropped -- a fused kernel chooses its own.  A tensor
    that one member writes and another reads is marked ``inout``.
    """
    merged: dict[str, KernelArg] = {}
    for event in events:
        for arg in launch_args(parsed, event):
            if arg.role in ("scalar", "grid"):
                continue
            if arg.expr not in merged:
                merged[arg.expr] = arg
                continue
            prev = merged[arg.expr]
            if prev.role != arg.role:
                merged[arg.expr] = prev.model_copy(update={"role": "inout"})
    return list(merged.values())


def fusion_runs(parsed: ParsedWrapper) -> list[list[Event]]:
    """Maximal runs of launches, per wrapper function, with no library call between them."""
    runs: list[list[Event]] = []
    current: list[Event] = []
    function = None
    for event in parsed.events:
        if event.kind == "library" or event.function != function:
            if current:
                runs.append(current)
            current = []
            function = event.function
        if event.kind == "launch":
            current.append(event)
    if current:
        runs.append(current)
    return [run for run in runs if len({e.name for e in run}) >= 2]


def _triton_kernels(parsed: ParsedWrapper, store: ArtifactStore) -> list[TritonKernel]:
    out: list[TritonKernel] = []
    by_kernel: dict[str, list[Event]] = {}  # one pass: launches_of per kernel is quadratic
    for event in parsed.launches:
        by_kernel.setdefault(event.name, []).append(event)
    seen = set(by_kernel)
    for name, events in by_kernel.items():
        event = events[0]
        kernel = parsed.kernels[name]
        launches = []
        for ev in events:
            launches.append(
                KernelLaunch(
                    line=ev.span.line,
                    site=ev.text,
                    function=ev.function,
                    args=launch_args(parsed, ev),
                )
            )
        first = launches[0]
        out.append(
            TritonKernel(
                name=kernel.name,
                source=store.put_text(kernel.source, name=f"{kernel.name}.py"),
                launch_line=first.line,
                launch_site=first.site,
                args=first.args,
                grid=_grid_text(parsed, event, first.args),
                config=kernel.config,
                kind=kernel.kind,
                defined_line=kernel.span.line,
                params=kernel.params,
                launches=launches,
            )
        )
    unused = sorted(set(parsed.kernels) - seen)
    if unused:
        log.info("kernels defined but never launched", kernels=unused)
    return out


def build_segment(
    parsed: ParsedWrapper,
    store: ArtifactStore,
    requested: SearchMode = SearchMode.AUTO,
    compiled: CompileResult | None = None,
) -> SegmentResult:
    """Kernels, library calls, fusion groups, mode and search targets from a parsed wrapper."""
    kernels = _triton_kernels(parsed, store)
    library_calls = [
        LibraryCall(name=e.name, line=e.span.line, statement=e.text, function=e.function)
        for e in parsed.library_calls
    ]
    runs = fusion_runs(parsed)
    groups = [
        FusionGroup(
            kernels=list(dict.fromkeys(e.name for e in run)),
            lines=[e.span.line for e in run],
        )
        for run in runs
    ]
    mode, reason, forced = select_mode(parsed, requested)
    kind = compiled.problem.kind if compiled is not None else None
    if kind is not None and kind.whole_forward_only:
        mode, forced = SearchMode.SINGLE, False
        reason = (
            f"{kind.value} kernel problem: the launcher is the one target, its inputs and "
            "outputs the contract, the file's own kernel the baseline"
        )
        if requested == SearchMode.MULTI:
            reason += " (multi-kernel mode was asked for: it has no Inductor kernels to apply to)"
    targets: list[SearchTarget] = []
    if mode == SearchMode.SINGLE:
        source = compiled.problem.source if compiled is not None else None
        targets.append(
            SearchTarget(
                id=FORWARD_TARGET_ID,
                kind=TargetKind.FORWARD,
                kernels=[k.name for k in kernels],
                source=source,
                signature=compiled.forward_inputs() if compiled is not None else [],
                description="the whole forward: write ModelNew (same constructor as Model)",
            )
        )
    else:
        for kernel in kernels:
            targets.append(
                SearchTarget(
                    id=kernel.name,
                    kind=TargetKind.KERNEL,
                    kernels=[kernel.name],
                    source=kernel.source,
                    signature=kernel.args,
                    description=(
                        f"{kernel.kind or 'triton'} kernel, {len(kernel.launches)} launch(es); "
                        f"grid {kernel.grid}"
                    ),
                )
            )
        for i, (group, run) in enumerate(zip(groups, runs, strict=True)):
            text = "\n\n".join(
                f"# ---- {name} ----\n{parsed.kernels[name].source.strip()}\n"
                for name in group.kernels
            )
            targets.append(
                SearchTarget(
                    id=f"group{i}",
                    kind=TargetKind.FUSION_GROUP,
                    kernels=group.kernels,
                    source=store.put_text(text, name=f"group{i}.py"),
                    signature=group_signature(parsed, run),
                    description=f"fusion of {len(run)} adjacent launches: {', '.join(group.kernels)}",
                )
            )
    return SegmentResult(
        kernels=kernels,
        library_calls=library_calls,
        fusion_groups=groups,
        mode=mode,
        mode_reason=reason,
        targets=targets,
        mode_forced=forced,
        wrapper_format=parsed.wrapper_format,
    )


def segment(inp: SegmentInput, store: ArtifactStore) -> SegmentResult:
    """Activity entry point: parse the baseline wrapper of ``inp.compiled``."""
    parsed = parse_wrapper(store.get_text(inp.compiled.wrapper))
    result = build_segment(parsed, store, inp.mode, inp.compiled)
    log.info(
        "segmented",
        problem=inp.compiled.problem.name,
        kernels=len(result.kernels),
        library_calls=len(result.library_calls),
        groups=len(result.fusion_groups),
        mode=result.mode.value,
    )
    return result
