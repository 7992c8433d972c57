"""Gate 3 -- V_model: the whole model end to end at 1e-4, with the float64 error-ratio rule.

``o32`` is the candidate's output (from the gate-2 child: no extra process),
``b32`` the eager fp32 baseline with TF32 off, ``b64`` the same model in
float64.  The rule itself is ``gates.numerics.model_error_rule``; this module
applies it to every input set and turns the worst case into a verdict.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from gates.numerics import (
    ModelErrorReport,
    baseline_float64,
    model_error_rule,
    real_view,
    scalar_tensor,
)
from gates.reference_facts import ReferenceFacts
from gates.sampled_float64 import SampledRule
from kernelopt.contracts.verdicts import GateName, GateSettings, GateStatus, GateVerdict


def _compared(leaves: list[Any], baseline: list[Any]) -> list[Any]:
    """The leaves gate 3 compares: tensors, and Python floats where the baseline has one
    (as 0-d float64 tensors)."""
    kept = []
    for i, leaf in enumerate(leaves):
        number = isinstance(leaf, (float, int)) and not isinstance(leaf, bool)
        if number and i < len(baseline) and isinstance(baseline[i], float):
            kept.append(scalar_tensor(leaf))
        elif hasattr(leaf, "shape"):
            kept.append(leaf)
    return kept


def model_verdict_from_sets(
    sets: list[tuple[str, list[Any], list[Any], list[Any] | None]],
    *,
    tolerance: float,
    rho_max: float,
    settings: GateSettings,
    seconds: float = 0.0,
    fp64_error: str = "",
    facts: ReferenceFacts | None = None,
) -> GateVerdict:
    """``sets``: (name, o32 leaves, b32 leaves, b64 leaves or None) per input set.

    ``facts``: the reference bundle's, so the baselines' own numbers are computed once.
    """
    reports: list[tuple[str, ModelErrorReport]] = []
    for name, o32, b32, b64 in sets:
        tensors, base = _compared(o32, b32), _compared(b32, b32)
        ref64 = _compared(b64, b32) if b64 is not None else None
        reports.append(
            (
                name,
                model_error_rule(
                    tensors,
                    base,
                    ref64,
                    tolerance=tolerance,
                    rho_max=rho_max,
                    d_ref_floor=settings.d_ref_floor,
                    abs_bound=settings.model_abs_bound,
                    facts=facts,
                ),
            )
        )
    thresholds = {
        "tolerance": tolerance,
        "rho_max": rho_max,
        "d_ref_floor": settings.d_ref_floor,
        "abs_bound": settings.model_abs_bound,
    }
    rhos = [r.rho for _, r in reports if r.rho is not None]
    metrics: dict[str, Any] = {
        "sets": [{"set": name, **r.as_dict()} for name, r in reports],
        "max_rho": max(rhos) if rhos else None,
        "max_d_opt": max((r.d_opt for _, r in reports if r.d_opt is not None), default=None),
        "max_d_ref": max((r.d_ref for _, r in reports if r.d_ref is not None), default=None),
        "fp64": not fp64_error,
    }
    if fp64_error:
        metrics["fp64_error"] = fp64_error
    failed = [(name, r) for name, r in reports if not r.ok]
    verdict = functools.partial(
        GateVerdict,
        gate=GateName.MODEL,
        metrics=metrics,
        thresholds=thresholds,
        gpu_seconds=seconds,
    )
    if not reports:
        return verdict(status=GateStatus.ERROR, reason="no outputs to compare")
    if failed:
        name, worst = max(failed, key=lambda item: item[1].rho or 0.0)
        return verdict(
            status=GateStatus.FAIL,
            reason=f"{name}: {worst.reason}",
            feedback=_feedback(failed, worst, rho_max),
        )
    rules = sorted({r.rule for _, r in reports})
    worst_rho = f", max rho {max(rhos):.3g}" if rhos else ""
    return verdict(
        status=GateStatus.PASS,
        reason=f"{len(reports)} input sets pass ({'/'.join(rules)}{worst_rho})",
    )


def _feedback(
    failed: list[tuple[str, ModelErrorReport]], worst: ModelErrorReport, rho_max: float
) -> str:
    """What the rule means once, then one ``- call NAME: ...`` line per kind of failure.

    The lines have gate 2's bullet shape, so the agents' ``merge_failures`` folds
    sets that fail alike (only their numbers differ) into one line too.
    """
    return "\n".join([_explain(worst, rho_max), *_bullets(failed, rho_max)])


def _explain(report: ModelErrorReport, rho_max: float) -> str:
    if report.rule == "rho":
        return (
            "End-to-end precision check failed (gate 3): against a float64 reference your "
            f"output is off by far more than the fp32 reference itself (honest fp32 kernels stay "
            f"below {rho_max:g}x its error). That is a systematic error, not rounding: a bias "
            "or offset, a dropped or padded term, an approximate function (tanh-GELU instead "
            "of erf, fast exp), or reduced precision (fp16/bf16 arithmetic or accumulation, "
            "TF32 matmul -- use tl.dot(..., input_precision='ieee')). Compute in exact fp32."
        )
    if report.rule == "structure":
        return "End-to-end check failed (gate 3):"
    return (
        "End-to-end precision check failed (gate 3). The reference is exact here, so any "
        "deviation beyond rounding means the computation differs:"
    )


def _bullets(failed: list[tuple[str, ModelErrorReport]], rho_max: float) -> list[str]:
    """One line per input set, identical texts merged into one line naming every set."""
    by_text: dict[str, list[str]] = {}
    for name, report in failed:
        by_text.setdefault(_line(report, rho_max), []).append(name)
    return [
        f"- {'call' if len(names) == 1 else 'calls'} {', '.join(names)}: {text}"
        for text, names in by_text.items()
    ]


def _line(report: ModelErrorReport, rho_max: float) -> str:
    if report.rule == "rho" and report.rho is not None:
        return (
            f"off by {report.d_opt:.3g} against float64 where the fp32 reference is off by "
            f"{report.d_ref:.3g} (ratio {report.rho:.3g} > {rho_max:g})."
        )
    return f"{report.reason}."


def sampled_rule(
    b32: list[Any], b64: list[Any], settings: GateSettings, facts: ReferenceFacts
) -> SampledRule | None:
    """Gate 3's rule for the sampled elements of timed calls on one set (None: the two
    baselines' leaves do not pair up one by one, so samples cannot be placed in both)."""
    if len(b32) != len(b64):
        return None
    refs64: dict[int, torch.Tensor] = {}
    for j, (r32, r64) in enumerate(zip(b32, b64, strict=True)):
        if not isinstance(r32, torch.Tensor):
            continue
        if not isinstance(r64, torch.Tensor) or r32.numel() != r64.numel():
            return None
        flat32, flat64 = real_view(r32), real_view(r64)
        if flat32.is_floating_point() != flat64.is_floating_point():
            return None
        if flat32.is_floating_point():
            refs64[j] = flat64.reshape(-1).double()
    numbers = baseline_float64(_compared(b32, b32), _compared(b64, b32), facts)
    return SampledRule(
        refs64=refs64,
        numbers=numbers,
        tolerance=settings.model_tolerance,
        rho_max=settings.rho_max,
        d_ref_floor=settings.d_ref_floor,
        abs_bound=settings.model_abs_bound,
    )
