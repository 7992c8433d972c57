"""A standalone Triton or Helion kernel problem, loaded and adapted to the KernelBench shape.

``load_kernel_problem`` imports the file and checks what can be checked
without running the kernel (names, callables, signatures, how many inputs
``get_inputs()`` yields -- counted on the meta device, so nothing big is
allocated).  ``KernelProblem.as_loaded()`` (called by the kind classes of
``kernelopt.kinds.kernel``) then presents it as the
``LoadedProblem`` every other part of kernelopt already understands:

* ``Model`` is ``ReferenceModel``: no parameters, ``forward(*inputs)`` is
  ``reference(*inputs)`` -- the eager role (gates 2 and 3 compare against it,
  in float32 with TF32 off and in float64);
* ``get_init_inputs()`` is ``[]``; ``get_inputs`` / ``get_holdout_inputs`` are
  the file's own;
* ``kernel`` is this object and ``runtime`` its kind: the gates ask the kind
  for the baseline (the file's own launcher, see ``kernelopt.kinds.baseline``)
  and for the runtime checks (``kernelopt.kinds.validate``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.kinds.detect import Params, check_kernel_source, compare_params
from kernelopt.kinds.modules import import_path, kinds_dir
from kernelopt.kinds.validate import input_lists
from kernelopt.loaded_problem import KernelProblem, problem_functions
from kernelopt.pyfile import source_digest, write_source

_TUNE_NAME = "TUNE"
_EFFORT_NAME = "AUTOTUNE_EFFORT"


def runtime_params(fn: Any) -> Params:
    """``Params`` of a live callable (a Helion kernel is read through its ``fn``)."""
    target = getattr(fn, "fn", fn) if not inspect.isfunction(fn) else fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return Params(varargs=True)
    out = Params()
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            (out.required if p.default is p.empty else out.optional).append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            out.varargs = True
        elif p.kind == p.KEYWORD_ONLY:
            out.keyword_only[p.name] = None if p.default is p.empty else p.default
    return out


def load_kernel_problem(
    path: Path | None, source: str, label: str, name: str | None = None
) -> KernelProblem:
    """Import a kernel problem (``path``, or ``source`` written to a file) and validate it."""
    info = check_kernel_source(source, label)
    digest = source_digest(source, 16)
    if path is None:
        path = write_source(kinds_dir() / f"problem_{digest}.py", source)
    module = import_path(path, f"kernelopt_problem_{digest}", label)
    problem_name = name or Path(label).stem
    kernels = tuple(info.helion_kernels if info.kind == ProblemKind.HELION else info.triton_kernels)
    for kernel in kernels:
        if getattr(module, kernel, None) is None:
            raise ProblemError(label, f"kernel {kernel} is not defined after import")
    entry = "launch" if "launch" in info.functions else kernels[0]
    funcs = problem_functions(
        module, ("reference", "get_inputs", "get_holdout_inputs", entry), label
    )
    ours, theirs = runtime_params(funcs[entry]), runtime_params(funcs["reference"])
    mismatch = compare_params(entry, ours, theirs)
    if mismatch:
        raise ProblemError(label, mismatch)
    tunables = {
        k: v for k, v in ours.keyword_only.items() if isinstance(v, int) and not isinstance(v, bool)
    }
    problem = KernelProblem(
        kind=info.kind,
        name=problem_name,
        path=label,
        source=source,
        module=module,
        reference=funcs["reference"],
        get_inputs=funcs["get_inputs"],
        get_holdout_inputs=funcs["get_holdout_inputs"],
        kernels=kernels,
        entry=entry,
        tunables=tunables if info.kind == ProblemKind.TRITON else {},
        tune_space=_tune_space(module, tunables, label),
        autotune_effort=_effort(module, label) if info.kind == ProblemKind.HELION else None,
    )
    _check_input_counts(problem, ours, theirs)
    return problem


def _tune_space(module: ModuleType, tunables: dict[str, int], label: str) -> dict[str, list[int]]:
    """The optional ``TUNE = {name: [values]}``: only launch's keyword-only ints may appear."""
    space = getattr(module, _TUNE_NAME, None)
    if space is None:
        return {}
    if not isinstance(space, dict):
        raise ProblemError(label, f"{_TUNE_NAME} must be a dict of name -> list of ints")
    out: dict[str, list[int]] = {}
    for key, values in space.items():
        if key not in tunables:
            known = ", ".join(sorted(tunables)) or "none"
            raise ProblemError(
                label,
                f"{_TUNE_NAME}[{key!r}] is not a keyword-only int parameter of launch() "
                f"(those are: {known})",
            )
        if not isinstance(values, (list, tuple)) or not values:
            raise ProblemError(label, f"{_TUNE_NAME}[{key!r}] must be a non-empty list of ints")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ProblemError(label, f"{_TUNE_NAME}[{key!r}] must hold ints only")
        out[key] = sorted(set(values))
    return out


def _effort(module: ModuleType, label: str) -> str | None:
    value = getattr(module, _EFFORT_NAME, None)
    if value is None:
        return None
    if value not in ("none", "quick", "full"):
        raise ProblemError(
            label, f"{_EFFORT_NAME} must be 'none', 'quick' or 'full', not {value!r}"
        )
    return str(value)


def _check_input_counts(problem: KernelProblem, launch: Params, reference: Params) -> None:
    """Every input list the generators yield must fit both signatures (counted on meta)."""
    for set_name, values in input_lists(problem, seed=0):
        n = len(values)
        for who, params in ((problem.entry, launch), ("reference", reference)):
            if not params.accepts(n):
                raise ProblemError(
                    problem.path,
                    f"{set_name} yields {n} input(s) but {who}{params.text()} takes "
                    f"{len(params.required)}"
                    + ("" if params.varargs else f" to {len(params.positional)}"),
                )
