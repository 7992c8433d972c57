"""Candidates for kernel problems: ``ModelNew``, or the problem's own ``launch`` contract.

A kernel problem's candidate may be written like its baseline -- a module
defining ``launch(*inputs)`` that returns the outputs -- or like any
single-kernel candidate, a module defining ``class ModelNew``.  The gates,
re-stitching and ``ForwardRunner`` know one form, ``ModelNew``; a
launch-only file is given the same shim as the baseline
(``kernelopt.kinds.baseline``) before it is checked, so both forms go
through identical machinery.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelopt.contracts.problem import ProblemKind
from kernelopt.kinds.baseline import forward_source
from kernelopt.pyfile import read_source


def needs_shim(source: str) -> bool:
    """True when ``source`` defines ``launch`` at top level but no ``ModelNew``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False  # gate 1 reports it, with the candidate's own line numbers
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return "launch" in functions and "ModelNew" not in names


def forward_candidate(source: str) -> str:
    """``source`` in the ``ModelNew`` form (unchanged when it already has one)."""
    if not needs_shim(source):
        return source
    return forward_source(
        ProblemKind.TRITON, source, "launch", {}, "candidate: its launch(*inputs) as ModelNew"
    )


def forward_candidate_file(candidate: str | Path, directory: Path) -> Path:
    """The candidate file to check: the original, or a ``ModelNew``-form copy in ``directory``."""
    path = Path(candidate)
    source = read_source(path)
    if not needs_shim(source):
        return path
    out = Path(directory) / f"{path.stem}_forward.py"
    out.write_text(forward_candidate(source), encoding="utf-8")
    return out
