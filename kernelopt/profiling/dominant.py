"""Which kernel a profile is of: for a whole-model target, the one with the most GPU time.

A whole-model (forward) target holds every Inductor kernel of the forward;
profiling "the first launch" measured whichever kernel happened to run first,
often a small prologue.  The dominant kernel by measured time (triage's
per-kernel GPU ms, ``ProfileInput.kernel_times``) is the one worth reading.
"""

from __future__ import annotations

from kernelopt.contracts.compiled import SearchTarget, TargetKind


def dominant_kernel(kernels: list[str], times: dict[str, float]) -> tuple[str, str]:
    """(name, why) of the kernel with the most measured time; ("", why) when none is measured.

    Ties keep program order (the first of equals), so the choice is deterministic.
    """
    measured = [(times[k], i, k) for i, k in enumerate(kernels) if k in times]
    if not measured:
        return "", "no per-kernel times measured"
    total = sum(ms for ms, _, _ in measured)
    ms, _, name = max(measured, key=lambda m: (m[0], -m[1]))
    share = f", {ms / total:.0%} of the Triton time" if total > 0 else ""
    return name, f"dominant kernel: {ms * 1000:.2f} us per forward{share}"


def profiled_kernel(target: SearchTarget, times: dict[str, float]) -> tuple[str, str]:
    """The kernel to profile for a target, and why that one."""
    if not target.kernels:
        return "", "the target names no kernel"
    if target.kind == TargetKind.FORWARD and len(target.kernels) > 1:
        name, why = dominant_kernel(target.kernels, times)
        if name:
            return name, why
        return target.kernels[0], f"first kernel ({why})"
    if target.kind == TargetKind.FUSION_GROUP:
        name, why = dominant_kernel(target.kernels, times)
        return (name, why) if name else (target.kernels[0], "first kernel of the group")
    return target.kernels[0], "the target's kernel"
