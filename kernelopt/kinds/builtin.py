"""The built-in proposer for kernel problems: the launch space the file itself exposes.

Without an LLM, a kernel problem is searched the way the built-in proposer
searches Inductor kernels -- by launch configuration -- through the same
gates:

* **Triton**: ``launch``'s keyword-only ``int`` parameters are its launch
  configuration (``BLOCK: int = 1024``, ``num_warps: int = 4``, ...).  Each
  has a list of values: the file's optional ``TUNE = {name: [values]}``, else
  ``num_warps`` 1-32 and ``num_stages`` 1-6, powers of two from 1/16x to 16x
  for a power-of-two default, default +-2 otherwise.  A state's variants are
  the configs one or two steps away from it, nearest first;
* **Helion**: from the baseline's autotuned config (or a variant's), each
  kernel's ``block_sizes`` entries x2 / /2, ``num_warps`` x2 / /2 and
  ``num_stages`` +-1 -- a coordinate-descent walk from Helion's own answer.

Every variant is the problem's source plus the ``ModelNew`` shim of
``kernelopt.kinds.baseline`` with its config, i.e. a forward-form candidate;
the label is the full config, so the search never tries one twice.

Entry point (supervised-child convention): ``propose(inp, store)``.
"""

from __future__ import annotations

import ast
import itertools
import json
from typing import Any

from kernelopt.contracts.problem import ProblemKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, BuiltinVariant
from kernelopt.kinds.baseline import forward_source, read_config
from kernelopt.kinds.detect import check_kernel_source, params_of
from kernelopt.store import ArtifactStore

WARPS = [1, 2, 4, 8, 16, 32]
STAGES = [1, 2, 3, 4, 5, 6]
MAX_BLOCK = 4096


def triton_space(tunables: dict[str, int], tune: dict[str, list[int]]) -> dict[str, list[int]]:
    """The values each launch parameter may take (the default always among them)."""
    space: dict[str, list[int]] = {}
    for name, default in tunables.items():
        if name in tune:
            values = set(tune[name])
        elif name == "num_warps":
            values = set(WARPS)
        elif name == "num_stages":
            values = set(STAGES)
        elif default > 0 and default & (default - 1) == 0:
            values = {default << k for k in range(5)} | {
                default >> k for k in range(1, 5) if default >> k >= 1
            }
        else:
            values = {v for v in range(default - 2, default + 3) if v >= 1}
        space[name] = sorted(values | {default})
    return space


def label_of(config: dict[str, Any]) -> str:
    return ",".join(f"{k}={config[k]}" for k in sorted(config))


def triton_moves(
    current: dict[str, int], space: dict[str, list[int]], max_params: int = 2
) -> list[dict[str, int]]:
    """Configs that move one, then two parameters one step along their value lists."""
    steps: dict[str, list[int]] = {}
    for name, values in space.items():
        i = values.index(current[name]) if current[name] in values else None
        steps[name] = (
            [values[j] for j in (i + 1, i - 1) if 0 <= j < len(values)] if i is not None else []
        )
    out: list[dict[str, int]] = []
    names = sorted(space)
    for k in range(1, max_params + 1):
        for chosen in itertools.combinations(names, k):
            for values in itertools.product(*(steps[n] for n in chosen)):
                out.append({**current, **dict(zip(chosen, values, strict=True))})
    return out


def helion_moves(current: dict[str, dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """One coordinate step of one kernel's block sizes, warps or stages."""
    out: list[dict[str, dict[str, Any]]] = []
    for kernel in sorted(current):
        config = current[kernel]
        blocks = list(config.get("block_sizes") or [])
        for i, size in enumerate(blocks):
            for new in (size * 2, size // 2):
                if 1 <= new <= MAX_BLOCK and new != size:
                    moved = [*blocks[:i], new, *blocks[i + 1 :]]
                    out.append({**current, kernel: {**config, "block_sizes": moved}})
        warps = int(config.get("num_warps", 4))
        for new in (warps * 2, warps // 2):
            if new in WARPS:
                out.append({**current, kernel: {**config, "num_warps": new}})
        stages = int(config.get("num_stages", 1))
        for new in (stages + 1, stages - 1):
            if 1 <= new <= 8:
                out.append({**current, kernel: {**config, "num_stages": new}})
    return out


def helion_label(configs: dict[str, dict[str, Any]]) -> str:
    parts = []
    for kernel in sorted(configs):
        c = configs[kernel]
        parts.append(
            f"{kernel}:block_sizes={c.get('block_sizes')},num_warps={c.get('num_warps')},"
            f"num_stages={c.get('num_stages')}"
        )
    return ";".join(parts)


def configs_in_wrapper(wrapper: str) -> dict[str, Any] | None:
    """The baseline config recorded in a kernel problem's compiled wrapper."""
    try:
        tree = ast.parse(wrapper)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "CANDIDATE_SOURCE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return read_config(node.value.value)
    return None


def _tunables(source: str) -> tuple[dict[str, int], dict[str, list[int]]]:
    """launch's keyword-only ints and the file's TUNE, read from text (no import needed)."""
    info = check_kernel_source(source)
    params = params_of(info.functions["launch"]) if "launch" in info.functions else None
    tunables = {
        k: v
        for k, v in (params.keyword_only.items() if params else [])
        if isinstance(v, int) and not isinstance(v, bool)
    }
    tune: dict[str, list[int]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TUNE" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = {}
            if isinstance(value, dict):
                tune = {k: [int(x) for x in v] for k, v in value.items() if k in tunables}
    return tunables, tune


def propose(inp: BuiltinProposeInput, store: ArtifactStore) -> BuiltinProposeResult:
    problem_source = store.get_text(inp.compiled.problem.source)
    state = read_config(store.get_text(inp.state_source))
    kind = inp.compiled.problem.kind
    exclude = set(inp.exclude)
    if kind == ProblemKind.HELION:
        base = configs_in_wrapper(store.get_text(inp.compiled.wrapper))
        if not base:
            return BuiltinProposeResult(
                variants=[], kernel_kind="helion", note="no baseline Helion config recorded"
            )
        current = state or base
        exclude.update({helion_label(current), helion_label(base)})  # the root is no variant
        moves = [(helion_label(m), m) for m in helion_moves(current)]
        origin = f"neighbours of {helion_label(current)}"
        kernel_kind = "helion"
    else:
        tunables, tune = _tunables(problem_source)
        if not tunables:
            return BuiltinProposeResult(
                variants=[],
                kernel_kind="triton-launch",
                note="launch() has no keyword-only int parameters: no launch space to search",
            )
        current = {**tunables, **(state or {})}
        exclude.update({label_of(current), label_of(tunables)})  # the root is no variant
        moves = [(label_of(m), m) for m in triton_moves(current, triton_space(tunables, tune))]
        origin = f"one- and two-step moves from {label_of(current)}"
        kernel_kind = "triton-launch"
    entry = _entry(kind, problem_source)
    variants: list[BuiltinVariant] = []
    for label, config in moves:
        if label in exclude or len(variants) >= inp.count:
            continue
        exclude.add(label)
        text = forward_source(kind, problem_source, entry, config, f"built-in variant {label}")
        ref = store.put_text(text, "text/x-python", f"{inp.compiled.problem.name}.variant.py")
        variants.append(
            BuiltinVariant(
                label=label,
                source=ref,
                config=json.loads(json.dumps(config)),
                description=f"launch configuration {label}",
            )
        )
    note = "" if len(variants) == inp.count else f"{origin}: exhausted after exclusions"
    return BuiltinProposeResult(variants=variants, kernel_kind=kernel_kind, note=note)


def _entry(kind: ProblemKind, source: str) -> str:
    """What ``ModelNew.forward`` calls: ``launch``, or a Helion problem's one kernel."""
    info = check_kernel_source(source)
    kernels = info.helion_kernels if kind == ProblemKind.HELION else info.triton_kernels
    return "launch" if "launch" in info.functions else kernels[0]
