"""The built-in proposer: candidates without an LLM, from interchangeable families.

Families (each decides whether it applies to the target; no problem names,
shapes or per-problem tables anywhere):

* ``template`` -- expert Triton kernels matched on the kernel's ATen graph
  fragment (``kernelopt.proposer.templates``), tuned over their own grid;
* ``launch-config`` -- launch-configuration variants of Inductor's own kernel
  (below);
* ``rewrite`` -- algebraic rewrites of the traced model as whole-forward
  ``ModelNew`` candidates, for forward targets (``kernelopt.proposer.rewrites``);
* ``regen`` -- the forward compiled again by Inductor under other config choices,
  also whole-forward candidates, a bounded number per round
  (``kernelopt.proposer.regen``);
* ``library`` -- explicit cuBLAS/cuDNN choices (memory format, cuDNN benchmark
  mode, cuBLASLt epilogues) as whole-forward candidates, only when the user opts in
  (``KERNELOPT_LIBRARY_CHOICES=1``): they change the library fraction f
  (``kernelopt.proposer.library``).

The launch-config family:

Used when no LLM endpoint is configured (``use_llm=False``): it searches the
kernel's launch configuration space (block sizes, ``num_warps``,
``num_stages``) by pinning configs through ``fixed_config`` and, once, the
same kernel without eviction hints.  Variants are candidates like any other:
same gates, same decisions, same report -- which says "builtin" plainly.

Entry point (supervised-child convention): ``propose(inp, store)``.
"""

from __future__ import annotations

from typing import Any

from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, BuiltinVariant
from kernelopt.kinds.registry import kind_named
from kernelopt.memory import ExperienceMemory
from kernelopt.proposer.inductor_source import (
    KernelSourceError,
    config_label,
    parse_kernel,
    with_fixed_config,
    without_eviction_hints,
)
from kernelopt.proposer.knowledge import family_gains, regen_first, template_share
from kernelopt.proposer.templates.base import read_header
from kernelopt.proposer.templates.family import propose_templates
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
    # a kind with a launch space of its own (a standalone Triton / Helion kernel) searches it
    own = kind_named(inp.compiled.problem.kind).builtin_variants(inp, store)
    if own is not None:
        return own
    if inp.target.kind == TargetKind.FORWARD:
        return propose_forward(inp, store)
    source = store.get_text(inp.state_source)
    exclude = set(inp.exclude)
    if read_header(source) is not None:  # a template state: walk the template's own grid
        variants, note = propose_templates(inp, store, source, inp.count, exclude)
        return BuiltinProposeResult(variants=variants, kernel_kind="template", note=note)
    # an expert template that matches gets its share of the round (half, unless earlier
    # campaigns say which family wins on kernels like this), Inductor's launch space the rest
    share = template_share(inp.count, remembered_gains(inp, store))
    templates, _ = propose_templates(inp, store, source, share, exclude)
    result = propose_launch_configs(
        inp.model_copy(update={"count": inp.count - len(templates)}), store, source
    )
    if templates and len(result.variants) < inp.count - len(templates):
        more, _ = propose_templates(
            inp, store, source, inp.count, exclude | {v.label for v in templates}
        )
        templates += more[: inp.count - len(templates) - len(result.variants)]
    if not templates:
        return result
    return result.model_copy(
        update={
            "variants": [*templates, *result.variants],
            "note": "" if len(templates) + len(result.variants) == inp.count else result.note,
        }
    )


def propose_forward(inp: BuiltinProposeInput, store: ArtifactStore) -> BuiltinProposeResult:
    """Whole-forward candidates: algebraic rewrites and Inductor regenerations.

    Rewrites are cheap and rare, so they go first unless earlier campaigns say
    regeneration won more; regeneration (a compile per variant) fills the rest
    of the round up to its own per-round cap.  Library choices, when the user
    opted in, come between the two: they are cheap to build but change f.
    """
    from kernelopt.config import Settings
    from kernelopt.proposer.library import propose_library
    from kernelopt.proposer.regen import propose_regen
    from kernelopt.proposer.rewrites.family import propose_rewrites  # imports torch

    exclude = set(inp.exclude)
    families = [propose_rewrites, propose_regen]
    if regen_first(remembered_gains(inp, store)):
        families.reverse()
    if Settings.from_env().library_choices:
        families.insert(1, propose_library)
    variants: list[BuiltinVariant] = []
    notes = []
    for family in families:
        found, note = family(inp, store, inp.count - len(variants), exclude)
        variants += found
        notes += [note] if note else []
    note = "" if len(variants) == inp.count else "; ".join(notes)
    return BuiltinProposeResult(variants=variants, kernel_kind="forward", note=note)


def remembered_gains(inp: BuiltinProposeInput, store: ArtifactStore) -> dict[str, float]:
    """Each family's best measured gain on kernels of this kind, from the campaign memory."""
    if inp.memory is None:
        return {}
    return family_gains(ExperienceMemory.load(store, inp.memory), inp.memory_tags)


def propose_launch_configs(
    inp: BuiltinProposeInput, store: ArtifactStore, source: str
) -> BuiltinProposeResult:
    """Launch-configuration variants of the Inductor kernel in ``source``."""
    if inp.count <= 0:
        return BuiltinProposeResult(variants=[])
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
