"""Gate 2 -- multi-seed correctness against the eager reference, at rtol = atol = 1e-3.

Judged here, in the parent, from the candidate child's saved outputs and the
reference bundle (which the child never saw).  Per call: structure, shape,
dtype, poison (unwritten elements), finiteness, allclose, the scale-aware
error, and input mutation.  The ``newvals`` call (new values in the previous
call's buffers) additionally recognises a stale answer -- the previous
call's output returned again -- and says so.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from gates.feedback import bullet_list, crash_feedback
from gates.numerics import OutputComparison, compare_outputs
from gates.problem_io import inputs_after, load_values, set_path, state_after
from gates.protocol import CandidateResult
from gates.reference import ReferenceBundle
from gates.runner import ChildOutcome
from kernelopt.contracts.verdicts import GateName, GateSettings, GateStatus, GateVerdict
from kernelopt.kinds.validate import same_values


def load_candidate_outputs(out_dir: Path, names: list[str]) -> dict[str, list[Any]]:
    outs = {}
    for name in names:
        path = set_path(str(out_dir), name)
        if path.is_file():
            try:
                outs[name] = load_values(path)
            except (EOFError, OSError, RuntimeError, pickle.UnpicklingError):
                continue  # a child that died mid-write left a truncated file: no output
    return outs


def _in_place_problem(
    bundle: ReferenceBundle, name: str, after: list[Any] | None, settings: GateSettings
) -> tuple[str, int]:
    """Why the inputs the reference changes in place came out otherwise ('' when they match
    the reference's within gate 2's tolerance, as outputs do), and the elements the float64
    excuse let pass."""
    info = bundle.set_info(name)
    theirs = info.mutates_inputs if info else []
    if not theirs:
        return "", 0
    if after is None:
        return f"the inputs {theirs} the reference changes in place were not recorded", 0
    post = bundle.inputs_as_left(name)
    post64 = bundle.post64.get(name)
    s = settings
    cmp = compare_outputs(
        after,
        [post[k] for k in theirs],
        rtol=s.rtol,
        atol=bundle.atol_for(name),  # grown on the widened set, as for the outputs
        scale_tol=s.scale_tol,
        refs64=[post64[k] for k in theirs] if post64 is not None else None,
    )
    if cmp.ok:
        return "", cmp.excused
    return (
        f"input(s) {theirs}, which the reference changes in place, came out otherwise after "
        f"the call ({cmp.problem}); change them as the reference does"
    ), cmp.excused


def _state_problem(
    bundle: ReferenceBundle, name: str, after: list[Any] | None, settings: GateSettings
) -> tuple[str, int]:
    """Why the module state the reference's call leaves (running statistics, a counter, an
    average) came out otherwise after the candidate's ('' when it matches, as outputs do).

    Every call starts from the state as built, so a forward that skips its update returns
    the same output; only the state it leaves tells them apart.  The second value counts
    the elements the float64 excuse let pass.
    """
    want = bundle.states.get(name)
    if want is None:
        return "", 0
    names = bundle.policy.stateful
    if after is None or len(after) != len(want):
        return (
            f"the model state the reference's forward updates ({', '.join(names)}) was not "
            "recorded after the call: ModelNew must be an nn.Module that keeps it"
        ), 0
    missing = [n for n, value in zip(names, after, strict=True) if value is None]
    if missing:
        return (
            f"the candidate has no {', '.join(missing)}, which the reference's forward updates "
            "in place: keep it under that name and update it as the reference does"
        ), 0
    cmp = compare_outputs(
        after,
        want,
        rtol=settings.rtol,
        atol=bundle.atol_for(name),
        scale_tol=settings.scale_tol,
        refs64=bundle.states64.get(name),
    )
    if cmp.ok:
        return "", cmp.excused
    return (
        f"the model state the reference's forward updates ({', '.join(names)}) came out "
        f"otherwise after the call ({cmp.problem}); update it as the reference does (running "
        "statistics, counters and averages are part of the forward's result)"
    ), cmp.excused


def _unrun_problem(kernels: list[str]) -> str:
    return (
        f"its Triton kernel(s) {', '.join(kernels)} never ran here (Triton's interpreter, "
        "on the CPU): a branch on the device (a 'CPU fallback') answered instead, so this "
        "check says nothing of the kernels. Run them on every device, or check on the GPU"
    )


def _stale(outs: dict[str, list[Any]], name: str, previous: str | None) -> bool:
    if previous is None or name not in outs or previous not in outs:
        return False
    a, b = outs[name], outs[previous]
    return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b, strict=True))


def _describe(kind: str, name: str, cmp: OutputComparison, bundle: ReferenceBundle) -> str:
    info = bundle.set_info(name)
    shapes = info.input_shapes if info else []
    leaf = next((x for x in cmp.leaves if not x.ok), None)
    if leaf is None:
        return cmp.problem
    where = f"input shapes {shapes}"
    if leaf.unwritten:
        pct = 100.0 * leaf.unwritten / max(1, leaf.numel)
        return (
            f"{where}: {leaf.unwritten} of {leaf.numel} output elements ({pct:.1f}%) were never "
            "written (they still hold the NaN poison the output memory was filled with). Every "
            "output element must be written: check that the grid covers the whole output."
        )
    if leaf.shape != leaf.ref_shape or leaf.dtype != leaf.ref_dtype:
        return f"{where}: {leaf.problem}."
    if leaf.mismatched:
        shown = leaf.worst_index and leaf.worst_value is not None  # not for a 0-d output
        expected = (
            f", expected {leaf.worst_ref:.6g}"
            if shown and leaf.worst_ref is not None and bundle.reveals(name)
            else ""
        )
        at = f" at index {leaf.worst_index} (got {leaf.worst_value:.6g}{expected})" if shown else ""
        return (
            f"{where}: {leaf.mismatched} of {leaf.numel} elements are outside tolerance; largest "
            f"error {leaf.max_abs_err:.3g}{at}."
        )
    if leaf.nonfinite:
        return f"{where}: {leaf.nonfinite} inf/NaN values where the reference is finite."
    return (
        f"{where}: the error ({leaf.max_abs_err:.3g}) is {leaf.scale_err:.1%} of the output's "
        f"magnitude ({leaf.ref_max_abs:.3g}). Outputs near zero, or much smaller than the "
        "reference, are wrong even when they are within an absolute tolerance."
    )


def _group(problems: list[tuple[str, str]]) -> list[str]:
    """One line per distinct problem, naming every call that showed it."""
    order: list[str] = []
    calls: dict[str, list[str]] = {}
    for name, text in problems:
        if text not in calls:
            order.append(text)
            calls[text] = []
        calls[text].append(name)
    lines = []
    for text in order:
        names = calls[text]
        label = "call" if len(names) == 1 else "calls"
        lines.append(f"{label} {', '.join(names)}: {text}")
    return lines


def correctness_verdict(
    bundle: ReferenceBundle,
    outcome: ChildOutcome,
    outs: dict[str, list[Any]],
    settings: GateSettings,
    *,
    seconds: float,
    inputs: dict[str, list[Any]] | None = None,
) -> GateVerdict:
    """Gate 2 verdict on the candidate's outputs (``load_candidate_outputs``), and on
    ``inputs``: by ``inputs_after(set)``, its values of the inputs the reference changes in
    place, after the call; by ``state_after(set)``, the module state the call left."""
    thresholds = {
        "rtol": settings.rtol,
        "atol": settings.atol,
        "scale_tol": settings.scale_tol,
        "seeds": bundle.seeds_used,
    }
    result = (
        CandidateResult.model_validate(outcome.result) if outcome.ok and outcome.result else None
    )
    calls_meta = {c.name: c for c in result.calls} if result else {}
    per_call: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = []
    previous: str | None = None
    for s in bundle.input_sets:
        if s.name not in outs:
            if outcome.ok:  # the child finished: its output was unreadable, never compared
                problems.append(
                    (
                        s.name,
                        "its output could not be read back for comparison; return plain "
                        "torch.Tensor outputs (no tensor subclasses or custom objects).",
                    )
                )
            break
        cmp = compare_outputs(
            outs[s.name],
            bundle.refs[s.name],
            rtol=settings.rtol,
            atol=bundle.atol_for(s.name),
            scale_tol=settings.scale_tol,
            facts=bundle.facts,
            refs64=(bundle.refs64 or {}).get(s.name),
            ties64=bundle.ties64.get(s.name),
        )
        meta = calls_meta.get(s.name)
        mutated = list(meta.mutated_inputs) if meta else []
        shape_problem = meta.output_problem if meta else ""
        stale = s.kind == "newvals" and not cmp.ok and _stale(outs, s.name, previous)
        info = bundle.set_info(s.name)
        entry: dict[str, Any] = {
            "set": s.name,
            "kind": s.kind,
            "seed": s.seed,
            "input_shapes": info.input_shapes if info else None,
            "ok": cmp.ok and not mutated and not shape_problem,
            "output_problem": shape_problem,
            "problem": cmp.problem,
            "max_abs_err": cmp.max_abs_err,
            "max_scale_err": cmp.max_scale_err,
            "unwritten": cmp.unwritten,
            "excused_by_float64": cmp.excused,
            "mutated_inputs": mutated,
            "reused_buffers": bool(meta and meta.reused_buffers),
            "stale_output": stale,
            "seconds": round(meta.seconds, 4) if meta else None,
            "leaves": [leaf.as_dict() for leaf in cmp.leaves],
        }
        per_call.append(entry)
        if shape_problem:
            problems.append(
                (
                    s.name,
                    f"{shape_problem}. Return plain tensors of the reference's shape and dtype, "
                    "computed and stored in fresh memory before forward() returns.",
                )
            )
        elif stale:
            problems.append(
                (
                    s.name,
                    "new values were written into the same input buffers and your output did "
                    "not change -- it is the previous call's output. Do not cache results by "
                    "pointer, shape or call count; compute from the input values on every call.",
                )
            )
        elif not cmp.ok:
            text = _describe(s.kind, s.name, cmp, bundle)
            if s.kind == "holdout":
                text += (
                    " This is a held-out input shape (another batch size than get_inputs()): "
                    "read sizes from the tensors instead of hard-coding them."
                )
            elif s.kind == "derived":
                text += (
                    " This is a batch size get_inputs() does not use (one row fewer or one "
                    "more): size grids, loops and masks from the tensors' shapes."
                )
            elif s.kind == "widened":
                text += (
                    " These inputs are get_inputs()' values negated and scaled: the kernel must "
                    "compute the model's function for any values, not only for the range and "
                    "sign get_inputs() draws (no term dropped because inputs are positive, "
                    "exponentials kept from overflowing as the model's ops keep them)."
                )
            problems.append((s.name, text))
        after = (inputs or {}).get(inputs_after(s.name))
        in_place, excused_inputs = _in_place_problem(bundle, s.name, after, settings)
        state, excused_state = _state_problem(
            bundle, s.name, (inputs or {}).get(state_after(s.name)), settings
        )
        entry["excused_by_float64"] += excused_inputs + excused_state
        if in_place:
            entry["ok"] = False
            entry["in_place_problem"] = in_place
            problems.append((s.name, in_place))
        if state:
            entry["ok"] = False
            entry["state_problem"] = state
            problems.append((s.name, state))
        if mutated:
            problems.append(
                (
                    s.name,
                    f"your forward modified input(s) {mutated} in place. Inputs must be left "
                    "unchanged: write results to a newly allocated output.",
                )
            )
        previous = s.name
    metrics: dict[str, Any] = {
        "calls": per_call,
        "weights": result.weights if result else None,
        "weights_note": result.weights_note if result else "",
        "child": outcome.summary(),
        "max_abs_err": max((c["max_abs_err"] for c in per_call), default=None),
        "max_scale_err": max((c["max_scale_err"] for c in per_call), default=None),
    }
    grouped = _group(problems)
    if result and result.unrun_kernels:  # whatever the calls returned, no kernel made it
        grouped.insert(0, _unrun_problem(result.unrun_kernels))
        metrics["unrun_kernels"] = result.unrun_kernels
    if not outcome.ok:
        metrics["traceback"] = outcome.error_text()
        fb = crash_feedback(outcome)
        if grouped:
            fb += "\n\nBefore that:\n" + bullet_list(grouped)
        verdict = GateVerdict(
            gate=GateName.CORRECTNESS,
            status=GateStatus.ERROR,
            reason=outcome.describe(),
            metrics=metrics,
            thresholds=thresholds,
            feedback=fb,
            gpu_seconds=seconds,
        )
        return verdict
    if grouped:
        feedback = "Your candidate produced wrong results:\n" + bullet_list(grouped)
        if result and result.weights == "seed" and result.weights_note:
            feedback += (
                f"\n\nNote: ModelNew's parameters could not be matched to Model's "
                f"({result.weights_note}); keep Model's parameter names and shapes."
            )
        verdict = GateVerdict(
            gate=GateName.CORRECTNESS,
            status=GateStatus.FAIL,
            reason=grouped[0].split(". ")[0][:300],
            metrics=metrics,
            thresholds=thresholds,
            feedback=feedback,
            gpu_seconds=seconds,
        )
        return verdict
    excused = sum(c["excused_by_float64"] for c in per_call)
    metrics["excused_by_float64"] = excused
    verdict = GateVerdict(
        gate=GateName.CORRECTNESS,
        status=GateStatus.PASS,
        reason=(
            f"{len(per_call)} calls match (max error {_number(metrics['max_abs_err'])}, "
            f"scale-relative {_number(metrics['max_scale_err'])})" + excused_text(excused)
        ),
        metrics=metrics,
        thresholds=thresholds,
        gpu_seconds=seconds,
    )
    return verdict


def excused_text(excused: int) -> str:
    """What a passing verdict adds when gate 2 excused elements by the float64 reference."""
    if not excused:
        return ""
    return (
        f"; {excused} elements apart from the eager reference (outside its tolerance, or "
        "beyond its scale) are nearer than it to the float64 reference"
    )


def _number(value: float | None) -> str:
    """An error for the reason line ("-" where no call had a tensor to measure)."""
    return "-" if value is None else f"{value:.3g}"
