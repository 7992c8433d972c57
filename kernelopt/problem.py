"""Load and validate problems in the KernelBench file format (the module kind).

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; ``Model(*get_init_inputs())(*get_inputs())`` is the
reference computation.  ``get_holdout_inputs()`` (a list of input lists) is
optional: shapes the search never sees, for the checker.  Standalone Triton
and Helion kernel files are other kinds: ``kernelopt.kinds.registry`` tells
the kinds apart and is the one loader of every problem; this module is what
its module kind (and the compile step's Inductor capture) builds on.

Two levels of checking, because they have different costs:

* ``check_problem_source`` parses the file with ``ast`` only.  The CLI calls it
  before starting any workflow, so a typo fails in milliseconds and without
  importing torch.
* ``load_module_problem`` imports the file, calls ``get_inputs``/``get_init_inputs``
  and builds the model once, so that a file which parses but cannot run is
  reported as a ``ProblemError`` (deterministic, never retried) instead of
  crashing a GPU activity later.

Weights and inputs are drawn from a seed (``make_model``/``make_inputs`` set
``torch.manual_seed`` first and generate on the CPU), so the same seed gives
the same tensors on every machine.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelopt.errors import ProblemError
from kernelopt.loaded_problem import (
    MODE_ATTR,
    MODES,
    LoadedProblem,
    apply_mode,
    check_forward_inputs,
    problem_functions,
    resolve_mode,
)
from kernelopt.pyfile import code_dir, exec_file, read_source, source_digest, write_source

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
OPTIONAL_FUNCTIONS = ("get_holdout_inputs",)


def read_problem_file(path: Path) -> str:
    """The text of a problem file; a missing or unreadable file is a ``ProblemError``."""
    if not path.exists():
        raise ProblemError(str(path), "file does not exist")
    if not path.is_file():
        raise ProblemError(str(path), "not a regular file")
    try:
        return read_source(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ProblemError(str(path), f"cannot read file: {exc}") from exc


def _top_level_names(tree: ast.Module) -> tuple[dict[str, ast.ClassDef], set[str]]:
    classes: dict[str, ast.ClassDef] = {}
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
            names.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return classes, names


def _model_binding(
    tree: ast.Module, classes: dict[str, ast.ClassDef]
) -> ast.ClassDef | ast.expr | None:
    """The class the file's last top-level binding of ``Model`` makes: its own ``class
    Model``, the file's class that ``Model = TinyNet`` names, or the name or attribute
    (``Model = nets.TinyNet``) the import-time check resolves; None for anything else."""
    bound: ast.ClassDef | ast.expr | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            bound = node
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "Model" for t in node.targets
        ):
            bound = node.value
    if isinstance(bound, ast.Name):
        return classes.get(bound.id, bound)
    return bound if isinstance(bound, (ast.ClassDef, ast.Attribute)) else None


def _defines_forward(model: ast.ClassDef) -> bool:
    for node in model.body:
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "forward" for t in node.targets
        ):
            return True
    return False


def _inherits_beyond_module(model: ast.ClassDef) -> bool:
    """True when a base of ``Model`` other than ``nn.Module`` may bring a forward (an
    ``nn.Sequential``, a class of the file): the import-time check decides then."""
    return any(ast.unparse(base).split(".")[-1] != "Module" for base in model.bases)


def check_problem_source(source: str, label: str = "<problem>") -> None:
    """AST-only validation of a KernelBench-format module (no import, no torch)."""
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as exc:
        raise ProblemError(label, f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    classes, names = _top_level_names(tree)
    model = _model_binding(tree, classes)
    if model is None:
        what = "is defined but not as a class" if "Model" in names else "is missing"
        raise ProblemError(label, f"`class Model(nn.Module)` {what}")
    if (
        isinstance(model, ast.ClassDef)
        and not _defines_forward(model)
        and not _inherits_beyond_module(model)
    ):
        raise ProblemError(label, "class Model defines no forward() method")
    missing = [fn for fn in REQUIRED_FUNCTIONS if fn not in names]
    if missing:
        raise ProblemError(label, f"missing top-level function(s): {', '.join(missing)}")


def declared_mode(source: str) -> str | None:
    """The ``KERNELOPT_MODE`` a problem file assigns at top level as a string, read without
    running the file (None where it assigns none, or not as a plain string)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(isinstance(t, ast.Name) and t.id == MODE_ATTR for t in targets)
            if named and isinstance(node.value.value, str):
                return node.value.value
    return None


def _import_file(path: Path, module_name: str, label: str) -> ModuleType:
    try:
        return exec_file(path, module_name)
    except Exception as exc:
        raise ProblemError(label, f"importing failed: {type(exc).__name__}: {exc}") from exc


def _looks_like_path(value: str) -> bool:
    return "\n" not in value and len(value) < 4096 and value.endswith(".py")


@dataclass(frozen=True)
class ProblemText:
    """A problem's text, the file it lives in and the label errors name."""

    path: Path
    source: str
    label: str


def problem_text(path_or_source: str | Path, name: str | None = None) -> ProblemText:
    """Read a problem file, or write source text to ``$KERNELOPT_HOME/problems/<sha>.py``.

    Triton and Dynamo want a real file behind every function they inspect, so
    every kind is loaded from a file, whichever way the text arrived.
    """
    if isinstance(path_or_source, Path) or _looks_like_path(str(path_or_source)):
        path = Path(path_or_source)
        return ProblemText(path, read_problem_file(path), str(path))
    source = str(path_or_source)
    path = code_dir("problems") / f"problem_{source_digest(source, 16)}.py"
    return ProblemText(write_source(path, source), source, name or "<problem>")


def load_module_problem(path_or_source: str | Path, name: str | None = None) -> LoadedProblem:
    """Import a KernelBench module problem (a path, or the source text itself) and validate it.

    Only the module kind: the loader of every kind is ``kernelopt.kinds.registry.load_problem``.
    """
    text = problem_text(path_or_source, name)
    return load_module_file(text, name)


def load_module_file(text: ProblemText, name: str | None = None) -> LoadedProblem:
    """Import the module problem in ``text.path`` (already read) and check that it runs."""
    check_problem_source(text.source, text.label)
    module_name = f"kernelopt_problem_{source_digest(text.source, 16)}"
    module = _import_file(text.path, module_name, text.label)
    return _validate(module, name or Path(text.label).stem, text.label, text.source)


def _validate(module: ModuleType, name: str, label: str, source: str) -> LoadedProblem:
    import torch

    model_class = getattr(module, "Model", None)
    if not isinstance(model_class, type) or not issubclass(model_class, torch.nn.Module):
        raise ProblemError(label, "Model is not a subclass of torch.nn.Module")
    if model_class.forward is torch.nn.Module.forward:
        raise ProblemError(label, "class Model defines no forward() method and inherits none")
    funcs = problem_functions(module, (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS), label)
    init = _call_list(funcs["get_init_inputs"], "get_init_inputs", label)
    inputs = _call_list(funcs["get_inputs"], "get_inputs", label)
    check_forward_inputs(inputs, "get_inputs()", label)
    try:
        model_class(*init)
    except Exception as exc:
        raise ProblemError(
            label, f"Model(*get_init_inputs()) failed: {type(exc).__name__}: {exc}"
        ) from exc
    mode = getattr(module, MODE_ATTR, None)
    if mode is not None and mode not in MODES:
        raise ProblemError(label, f"{MODE_ATTR} must be one of {MODES}, got {mode!r}")
    holdout = funcs["get_holdout_inputs"]
    if holdout is not None:
        cases = _call_list(holdout, "get_holdout_inputs", label)
        for i, case in enumerate(cases):
            if not isinstance(case, (list, tuple)):
                raise ProblemError(label, f"get_holdout_inputs()[{i}] is not a list of inputs")
    return LoadedProblem(
        name=name,
        path=label,
        source=source,
        module=module,
        model_class=model_class,
        get_inputs=funcs["get_inputs"],
        get_init_inputs=funcs["get_init_inputs"],
        get_holdout_inputs=holdout,
        mode=mode,
    )


def _call_list(fn: Callable[[], Any], fn_name: str, label: str) -> list[Any]:
    try:
        value = fn()
    except Exception as exc:
        raise ProblemError(label, f"{fn_name}() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(value, (list, tuple)):
        raise ProblemError(label, f"{fn_name}() must return a list, got {type(value).__name__}")
    return list(value)


__all__ = [
    "LoadedProblem",
    "ProblemText",
    "apply_mode",
    "check_problem_source",
    "declared_mode",
    "load_module_file",
    "load_module_problem",
    "problem_text",
    "read_problem_file",
    "resolve_mode",
]
