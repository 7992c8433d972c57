"""The search cut-off: which ranked targets a campaign searches, and the rule in words.

Pure (contracts only), so triage and the workflows' own target lists share one rule.
"""

from __future__ import annotations

from typing import NamedTuple

from .compiled import SearchTarget, TargetKind, TriageInput

# The defaults live on the contract (TriageInput), so the activity, the CLI, the
# workflows and the tests share one home for them.
DEFAULT_COVERAGE = TriageInput.model_fields["coverage"].default
DEFAULT_MIN_SHARE = TriageInput.model_fields["min_share"].default


class Cutoff(NamedTuple):
    """Which ranked targets a campaign searches, and the rule in words."""

    searched: list[SearchTarget]
    deferred: list[SearchTarget]
    deferred_share: float
    rule: str


def select_targets(
    ranked: list[SearchTarget],
    kernel_ms: dict[str, float],
    total_ms: float,
    coverage: float = DEFAULT_COVERAGE,
    min_share: float = DEFAULT_MIN_SHARE,
) -> Cutoff:
    """Search the largest Amdahl shares first and stop where the rest cannot pay.

    A target holding a share s of the model's GPU time gains at most 1/(1 - s)
    even if made infinitely fast, so at hundreds of kernels most targets are not
    worth a search slot.  In share order (``ranked``), targets are kept until the
    kernel targets kept cover ``coverage`` of the Triton time (``kernel_ms``,
    kernels counted once); a target under ``min_share`` is never kept; the first
    always is.  Fusion groups ride along while they rank above the cut: they
    overlap their kernels, so only kernel targets count towards the coverage.
    """
    triton_ms = sum(kernel_ms.values())
    if triton_ms <= 0:
        return Cutoff(list(ranked), [], 0.0, "no Triton time measured: every target searched")
    covered: set[str] = set()
    covered_ms = 0.0
    searched: list[SearchTarget] = []
    for target in ranked:
        if searched and (covered_ms >= coverage * triton_ms or target.share < min_share):
            break
        searched.append(target)
        if target.kind != TargetKind.FUSION_GROUP:
            new = set(target.kernels) - covered
            covered |= new
            covered_ms += sum(kernel_ms.get(k, 0.0) for k in new)
    deferred = ranked[len(searched) :]
    left = {k for t in deferred for k in t.kernels} - covered
    deferred_share = sum(kernel_ms.get(k, 0.0) for k in left) / total_ms if total_ms > 0 else 0.0
    rule = (
        f"largest Amdahl share first until the searched kernels cover {coverage:.0%} of the "
        f"Triton time, none under {min_share:.1%} of the model's GPU time: {len(searched)} of "
        f"{len(ranked)} targets searched"
    )
    if deferred:
        rule += (
            f"; {len(deferred)} deferred, their {len(left)} other kernels "
            f"{deferred_share:.1%} of the model's GPU time"
        )
    return Cutoff(searched, deferred, deferred_share, rule)


def kernels_short_of_gamma(triton_ms: float, total_ms: float, gamma: float) -> str:
    """Why no one-kernel target is worth a search beside the whole forward, or "".

    Replacing Triton kernels saves at most their GPU time, so when all of them
    together, made infinitely fast, would not make the model ``gamma`` faster, no
    mix of one-kernel replacements can be the outcome: only a whole-forward
    candidate, which may also change what the library calls compute, can.
    """
    if triton_ms <= 0 or total_ms <= 0:
        return ""  # nothing measured: no claim
    share = min(triton_ms / total_ms, 1.0)
    if share >= 1.0 or 1.0 / (1.0 - share) >= gamma:
        return ""
    return (
        f"every Triton kernel together holds {share:.1%} of the model's GPU time: even "
        f"infinitely fast they would make it at most {1.0 / (1.0 - share):.3f}x faster, "
        f"short of gamma {gamma:g}, so the built-in proposer searches the whole forward only"
    )
