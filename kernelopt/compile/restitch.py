"""Re-stitch accepted replacements into the baseline wrapper (docs/method.md#dispatch-aware-search).

The text work (``restitch_source``) is pure and runs on CPU machines; the
activity entry point (``restitch``) then loads the new wrapper, runs it on the
captured arguments and compares with the baseline output, bit for bit.  The
forms a candidate may take are documented in ``kernelopt.compile.contract``.

Edits are byte-range replacements computed from the parsed wrapper and
applied back to front, so every other byte of Inductor's text -- and
therefore every other kernel -- stays exactly as it was.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelopt.compile.segment import group_signature
from kernelopt.compile.segment_store import segment_of
from kernelopt.compile.wrapper_parse import Event, ParsedWrapper, _Source, parse_kernel_source
from kernelopt.contracts.compiled import (
    CompileResult,
    RestitchInput,
    RestitchResult,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.errors import DeterministicError
from kernelopt.log import get_logger
from kernelopt.store import ArtifactError, ArtifactStore

log = get_logger(__name__)

FORM_INDUCTOR = "inductor"
FORM_LAUNCH = "launch"
FORM_FORWARD = "forward"
_LOADER = "from kernelopt.compile.runtime import load_candidate_module as _ko_load_candidate"


class ReplacementError(DeterministicError):
    """A candidate does not fit the candidate contract for its target."""


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def _top_level_defs(source: str) -> tuple[set[str], set[str]]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ReplacementError(f"candidate does not parse: line {exc.lineno}: {exc.msg}") from exc
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    # classes, and names bound at top level (``ModelNew = Model`` is a valid forward candidate)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            classes.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return funcs, classes


def detect_form(target: SearchTarget, source: str) -> str:
    """Which form of the contract a candidate uses; ``ReplacementError`` if none fits."""
    funcs, classes = _top_level_defs(source)
    if target.kind == TargetKind.FORWARD:
        if "ModelNew" not in classes:
            raise ReplacementError("single-kernel (forward) candidate must define class ModelNew")
        return FORM_FORWARD
    if "launch" in funcs:
        return FORM_LAUNCH
    if target.kind == TargetKind.FUSION_GROUP:
        raise ReplacementError("a fusion-group candidate must define launch(*args)")
    if target.kernels and target.kernels[0] in funcs:
        return FORM_INDUCTOR
    raise ReplacementError(
        f"candidate defines neither launch(*args) nor def {target.kernels[0]}(...) "
        "(see the candidate contract)"
    )


def string_literal(text: str) -> str:
    """Inductor's ``'''...'''`` when that is exact, ``repr`` otherwise."""
    if "'''" not in text and "\\" not in text and not text.endswith("'"):
        return f"'''{text}'''"
    return repr(text)


def _var(target_id: str) -> str:
    return "_ko_cand_" + re.sub(r"\W", "_", target_id)


def _loader_stmt(target: SearchTarget, source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    return f"{_var(target.id)} = _ko_load_candidate({source!r}, {f'{target.id}_{digest}'!r})\n"


def _inductor_edit(parsed: ParsedWrapper, kernel: str, source: str) -> Edit:
    original = parsed.kernels[kernel]
    params, _, _, _ = parse_kernel_source(kernel, source)
    if params != original.params:
        raise ReplacementError(
            f"candidate for {kernel} has runtime parameters {params}, the original has "
            f"{original.params}: use the launch(*args) form for a different signature"
        )
    span = original.source_span
    return Edit(span.start, span.end, string_literal(source))


def _launch_line(var: str, args: list[str]) -> str:
    return f"{var}.launch({', '.join(args)})"


def _group_events(
    parsed: ParsedWrapper, target: SearchTarget, segment: SegmentResult
) -> list[Event]:
    index = int(target.id.removeprefix("group")) if target.id.startswith("group") else -1
    if not 0 <= index < len(segment.fusion_groups):
        raise ReplacementError(f"unknown fusion group {target.id}")
    lines = set(segment.fusion_groups[index].lines)
    events = [e for e in parsed.launches if e.span.line in lines]
    if len(events) != len(lines):
        raise ReplacementError(f"fusion group {target.id} does not match this wrapper")
    return events


def _deferred_dels(
    src: _Source, tree: ast.Module, first: Event, last: Event, names: set[str]
) -> tuple[list[Edit], list[str]]:
    """``del`` statements between a group's launches that drop group arguments.

    The fused launch runs where the group's last launch ran, so arguments an
    earlier member used must still exist there: those names are removed from
    the ``del`` and deleted after the fused launch instead.
    """
    edits: list[Edit] = []
    deferred: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Delete):
            continue
        if not first.span.line < node.lineno < last.span.line:
            continue
        keep, drop = [], []
        for t in node.targets:
            name = t.id if isinstance(t, ast.Name) else None
            (drop if name in names else keep).append(ast.unparse(t))
        if not drop:
            continue
        deferred.extend(drop)
        span = src.span(node)
        edits.append(Edit(span.start, span.end, f"del {', '.join(keep)}" if keep else "pass"))
    return edits, deferred


def restitch_source(
    source: str,
    segment: SegmentResult,
    replacements: list[tuple[SearchTarget, str]],
) -> tuple[str, dict[str, str]]:
    """Apply replacements to a wrapper's text.  Returns (new text, target id -> form)."""
    parsed = _parse(source)
    src = _Source(source)
    tree = ast.parse(source)
    edits: list[Edit] = []
    loaders: list[str] = []
    forms: dict[str, str] = {}
    touched: dict[str, str] = {}
    for target, cand in replacements:
        form = detect_form(target, cand)
        if form == FORM_FORWARD:
            raise ReplacementError(
                "forward candidates replace the whole wrapper: use forward_wrapper"
            )
        for kernel in target.kernels:
            if kernel in touched:
                raise ReplacementError(
                    f"kernel {kernel} is replaced by both {touched[kernel]} and {target.id}"
                )
            if kernel not in parsed.kernels:
                raise ReplacementError(f"kernel {kernel} is not in this wrapper")
            touched[kernel] = target.id
        forms[target.id] = form
        if form == FORM_INDUCTOR:
            edits.append(_inductor_edit(parsed, target.kernels[0], cand))
            continue
        var = _var(target.id)
        loaders.append(_loader_stmt(target, cand))
        if target.kind == TargetKind.KERNEL:
            for event in parsed.launches_of(target.kernels[0]):
                edits.append(Edit(event.span.start, event.span.end, _launch_line(var, event.args)))
            continue
        events = _group_events(parsed, target, segment)
        signature = [a.expr for a in group_signature(parsed, events)]
        for event in events[:-1]:
            edits.append(Edit(event.span.start, event.span.end, f"pass  # fused into {target.id}"))
        del_edits, deferred = _deferred_dels(src, tree, events[0], events[-1], set(signature))
        edits.extend(del_edits)
        line = _launch_line(var, signature)
        if deferred:
            line += f"\n{events[-1].indent}del {', '.join(deferred)}"
        edits.append(Edit(events[-1].span.start, events[-1].span.end, line))
    if loaders:
        anchor = parsed.wait_span.start if parsed.wait_span else _after_kernels(parsed)
        edits.append(Edit(anchor, anchor, _LOADER + "\n" + "".join(loaders) + "\n"))
    return _apply(src.data, edits), forms


def _after_kernels(parsed: ParsedWrapper) -> int:
    ends = [k.span.end for k in parsed.kernels.values()]
    if not ends:
        raise ReplacementError(
            "wrapper has neither kernels nor async_compile.wait(): cannot anchor"
        )
    return max(ends) + 1


def _apply(data: bytes, edits: list[Edit]) -> str:
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for a, b in itertools.pairwise(ordered):
        if b.start < a.end:
            raise ReplacementError("overlapping edits (the same statement replaced twice)")
    out = data
    for edit in reversed(ordered):
        out = out[: edit.start] + edit.text.encode("utf-8") + out[edit.end :]
    return out.decode("utf-8")


def _parse(source: str) -> ParsedWrapper:
    from kernelopt.compile.wrapper_parse import parse_wrapper

    return parse_wrapper(source)


def forward_wrapper(
    compiled: CompileResult,
    candidate: str,
    model_mode: str | None = None,
    constants: dict[int, Any] | None = None,
) -> str:
    """Single-kernel mode: a wrapper module whose ``call(args)`` runs ``ModelNew``."""
    return (
        '"""kernelopt forward wrapper: a single-kernel-mode candidate (ModelNew) with the\n'
        'captured weights; see kernelopt.compile.runtime.ForwardRunner."""\n\n'
        "from kernelopt.compile.runtime import ForwardRunner as _KoForwardRunner\n\n"
        "KERNELOPT_FORWARD = True\n"
        f"CANDIDATE_SOURCE = {candidate!r}\n"
        f"ARG_NAMES = {list(compiled.arg_names)!r}\n"
        f"ARG_ROLES = {list(compiled.arg_roles)!r}\n"
        f"SEED = {compiled.problem.seed!r}\n"
        f"LAYOUT = {forward_layout(compiled, model_mode, constants)!r}\n\n\n"
        "def make_call(init_inputs, device='cuda'):\n"
        "    runner = _KoForwardRunner(\n"
        "        CANDIDATE_SOURCE, ARG_NAMES, ARG_ROLES, SEED, init_inputs, device, **LAYOUT\n"
        "    )\n"
        "    return runner.call\n"
    )


def forward_layout(
    compiled: CompileResult, model_mode: str | None = None, constants: dict[int, Any] | None = None
) -> dict[str, Any]:
    """``ForwardRunner``'s keywords that put a ``ModelNew`` in the baseline wrapper's place:
    where each captured argument goes in the forward, the wrapper's output order, the mode
    (train/eval) the baseline was compiled in (``problem_mode``) and the plain inputs it
    baked in (``plain_inputs``)."""
    return {
        "model_mode": model_mode,
        "constants": dict(constants or {}),
        "input_index": list(compiled.arg_input_index) or None,
        "picks": [tuple(p) for p in compiled.output_picks]
        if compiled.output_picks is not None
        else None,
        "num_outputs": compiled.num_outputs,
        "state_outputs": dict(compiled.state_outputs),
    }


def problem_mode(compiled: CompileResult, store: ArtifactStore) -> str | None:
    """The mode the compile built the model in, as the file declares it (``KERNELOPT_MODE``);
    None, the model as constructed, where it declares none or its source is not stored."""
    from kernelopt.problem import declared_mode

    try:
        return declared_mode(store.get_text(compiled.problem.source))
    except ArtifactError:
        return None


def plain_inputs(compiled: CompileResult, store: ArtifactStore) -> dict[int, Any]:
    """The forward's inputs that are plain values (a float, an int, a string, None), by
    position: the compile baked them into the graph, so the captured list lacks them."""
    from kernelopt.compile.runtime import load_tensors

    literal = (bool, int, float, str, type(None))
    try:
        values = load_tensors(store, compiled.inputs)
    except ArtifactError:
        return {}
    return {i: v for i, v in enumerate(values) if isinstance(v, literal)}


def build_restitched(inp: RestitchInput, store: ArtifactStore) -> tuple[str, dict[str, str]]:
    """The re-stitched wrapper text for ``inp`` (pure: store reads only)."""
    baseline = store.get_text(inp.compiled.wrapper)
    pairs = [(r.target, store.get_text(r.source)) for r in inp.replacements]
    forward = [p for p in pairs if p[0].kind == TargetKind.FORWARD]
    if forward:
        if len(pairs) != 1:
            raise ReplacementError("a forward replacement cannot be combined with others")
        target, cand = forward[0]
        detect_form(target, cand)
        text = forward_wrapper(
            inp.compiled, cand, problem_mode(inp.compiled, store), plain_inputs(inp.compiled, store)
        )
        return text, {target.id: FORM_FORWARD}
    return restitch_source(baseline, segment_of(inp, store), pairs)


class RestitchRunError(DeterministicError):
    """The re-stitched model raised on the captured arguments: the same code on the same
    arguments raises again, so the trial is not kept and no attempt is retried."""


def run_restitched(call: Callable[[list[Any]], Any], args: list[Any]) -> Any:
    """``call(args)``, its exception a ``RestitchRunError`` (running out of GPU memory, which
    another process may have caused, stays what it is: a retry may find the memory free)."""
    import torch

    try:
        return call(args)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as exc:
        raise RestitchRunError(
            f"the re-stitched model failed on the captured arguments: {type(exc).__name__}: "
            f"{str(exc)[:300]}"
        ) from exc


def restitch(inp: RestitchInput, store: ArtifactStore) -> RestitchResult:
    """Activity entry point: build the wrapper, run it on the captured args, compare.

    The outputs are compared here and stored only when ``inp.keep_output`` asks: the
    durable store travels with a moved home, and a model's output is as large as its input.
    """
    text, forms = build_restitched(inp, store)
    ref = store.put_text(
        text, media_type="text/x-python", name=f"{inp.compiled.problem.name}_restitched.py"
    )
    replaced = [r.target.id for r in inp.replacements]
    if not inp.run:
        return RestitchResult(wrapper=ref, replaced=replaced, forms=forms)
    from kernelopt.stages import StageClock

    stages = StageClock()
    from kernelopt.compile.runtime import (
        load_tensors,
        prepare_wrapper_process,
        save_tensors,
        wrapper_call,
    )
    from kernelopt.compile.tensors import exact_match_and_max_diff

    stages.lap("imports")
    prepare_wrapper_process()
    stages.lap("cuda_init")
    call = wrapper_call(inp.compiled, store, ref)
    args = load_tensors(store, inp.compiled.args, "cuda")
    stages.lap("load")
    outputs = run_restitched(call, args)
    stages.lap("run")
    out_ref = None
    if inp.keep_output:  # else held only in memory: nothing after the comparison reads it
        out_ref = save_tensors(store, outputs, f"{inp.compiled.problem.name}_restitched_out.pt")
    bit_exact, max_diff = None, None
    reference = inp.compiled.reference_output
    # a diagnostic only: a home moved without its regenerable tensors (state export --thin)
    # no longer holds the compile's reference output, and nothing else depends on it
    if reference is not None and store.exists(reference):
        baseline = load_tensors(store, reference, "cuda")
        bit_exact, max_diff = exact_match_and_max_diff(outputs, baseline)
    elif reference is not None:
        log.info(
            "reference output not in the store: not compared", problem=inp.compiled.problem.name
        )
    stages.lap("compare")
    log.info(
        "restitched", problem=inp.compiled.problem.name, replaced=replaced, bit_exact=bit_exact
    )
    return RestitchResult(
        wrapper=ref,
        output=out_ref,
        bit_exact=bit_exact,
        replaced=replaced,
        max_abs_diff=max_diff,
        forms=forms,
        stage_seconds=stages.seconds,
    )
