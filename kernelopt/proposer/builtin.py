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
PROPOSER_DESCRIPTION = "builtin (no LLM): launch-configuration search over Inductor's kernel"
NO_EVICTION_LABEL = "no-eviction-hints"


def propose(inp: BuiltinProposeInput, store: ArtifactStore) -> BuiltinProposeResult:
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
    if kernel.fixed is not None:
        pool = neighbours(kernel, kernel.fixed)
        origin = f"neighbours of {config_label(kernel.fixed)}"
    else:
        pool = config_space(kernel)
        origin = f"{len(pool)}-point launch space"
    pool = [c for c in pool if config_label(c) not in exclude]
    need = max(0, inp.count - len(picks))
    if kernel.fixed is not None:
        chosen = pool[:need]
    else:
        chosen = pick_diverse(ranked(kernel, pool), need, kernel.block_params)
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


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)[:80]
