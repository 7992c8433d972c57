"""The built-in proposer: mechanical variants of an Inductor kernel, no LLM needed.

Used when no LLM endpoint is configured (``use_llm=False``): it searches the
kernel's launch configuration space (block sizes, ``num_warps``,
``num_stages``) by pinning configs through ``fixed_config`` and, once, the
same kernel without eviction hints.  Variants are candidates like any other:
same gates, same decisions, same report -- which says "builtin" plainly.

Entry point (supervised-child convention): ``propose(inp, store)``.
"""

from __future__ import annotations

from typing import Any

from kernelopt.contracts.problem import ProblemKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, BuiltinVariant
from kernelopt.proposer.inductor_source import (
    KernelSourceError,
    config_label,
    parse_kernel,
    with_fixed_config,
    without_eviction_hints,
)
from kernelopt.proposer.variants import (
    base_heuristic,
    config_space,
    neighbours,
    pick_diverse,
    ranked,
)
from kernelopt.store import ArtifactStore

PROPOSER_NAME = "builtin"
NO_EVICTION_LABEL = "no-eviction-hints"


def propose(inp: BuiltinProposeInput, store: ArtifactStore) -> BuiltinProposeResult:
    if inp.compiled.problem.kind != ProblemKind.MODULE:
        # standalone Triton / Helion problems: their launcher's own configuration space
        from kernelopt.kinds.builtin import propose as propose_kernel_problem

        return propose_kernel_problem(inp, store)
    source = store.get_text(inp.state_source)
    try:
        kernel = parse_kernel(source)
    except KernelSourceError as exc:
        return BuiltinProposeResult(variants=[], note=f"not an Inductor kernel source: {exc}")
    if not kernel.tunable:
        return BuiltinProposeResult(
            variants=[],
            kernel_kind=kernel.heuristic,
            note=f"@triton_heuristics.{kernel.heuristic} kernels have no launch space we search",
        )
    exclude = set(inp.exclude)
    picks: list[tuple[str, dict[str, Any] | None]] = []
    if (
        kernel.has_eviction_hints
        and NO_EVICTION_LABEL not in exclude
        and kernel.heuristic != "fixed_config"
    ):
        picks.append((NO_EVICTION_LABEL, None))
    need = max(0, inp.count - len(picks))
    baseline = baseline_config(inp, kernel.name) if kernel.fixed is None else None
    if kernel.fixed is not None:
        origin = f"neighbours of {config_label(kernel.fixed)}"
        chosen = [c for c in neighbours(kernel, kernel.fixed) if config_label(c) not in exclude]
        chosen = chosen[:need]
    else:
        space = [c for c in config_space(kernel) if config_label(c) not in exclude]
        origin = f"{len(space)}-point launch space"
        chosen = []
        if baseline is not None:  # Inductor's own pick is the root itself: walk from it
            exclude.add(config_label(baseline))
            near = [c for c in neighbours(kernel, baseline) if config_label(c) not in exclude]
            chosen = near[: (need + 1) // 2]
            origin += f" around Inductor's {config_label(baseline)}"
        taken = {config_label(c) for c in chosen} | exclude
        rest = [c for c in space if config_label(c) not in taken]
        chosen += pick_diverse(ranked(kernel, rest), need - len(chosen), kernel.block_params)
    picks.extend((config_label(c), c) for c in chosen)
    variants = []
    for label, config in picks[: inp.count]:
        if config is None:
            text = without_eviction_hints(source)
            description = "same kernel and autotuning, eviction hints dropped"
        else:
            text = with_fixed_config(source, kernel, config, label)
            description = f"pinned launch config {label}"
        ref = store.put_text(text, "text/x-python", f"{kernel.name}.{_slug(label)}.py")
        variants.append(
            BuiltinVariant(label=label, source=ref, config=config or {}, description=description)
        )
    note = "" if len(variants) == inp.count else f"{origin} exhausted after exclusions"
    return BuiltinProposeResult(variants=variants, kernel_kind=base_heuristic(kernel), note=note)


def baseline_config(inp: BuiltinProposeInput, kernel: str) -> dict[str, Any] | None:
    """The launch config the baseline's autotuner chose for ``kernel`` (compile step's pin)."""
    pin = inp.compiled.kernel_configs.get(kernel)
    if not isinstance(pin, dict) or not isinstance(pin.get("kwargs"), dict):
        return None
    try:
        config = {k: int(v) for k, v in pin["kwargs"].items()}
        config["num_warps"] = int(pin["num_warps"])
        config["num_stages"] = int(pin["num_stages"])
    except (KeyError, TypeError, ValueError):
        return None
    return config


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)[:80]
