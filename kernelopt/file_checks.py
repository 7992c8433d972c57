"""The first look at the files a user names (CLI, ``campaigns``): the right words before any work.

A directory is not "no such file", a candidate without ``ModelNew`` is not an
"import-time failure", and ``launch()`` is a candidate form too.  These checks
read text only (``ast``), so they cost milliseconds and import no torch.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelopt.errors import ProblemError
from kernelopt.pyfile import read_source

CANDIDATE_FORMS = (
    "a candidate defines `class ModelNew(nn.Module)` (forward(*inputs) returns the outputs) "
    "or a top-level `launch(*inputs)` that returns them"
)


def require_file(path: str | Path, what: str) -> Path:
    """``path`` as a readable regular file, else a ProblemError that says what it is instead."""
    path = Path(path)
    if path.is_dir():
        raise ProblemError(str(path), f"is a directory; give the {what}'s .py file")
    if not path.exists():
        raise ProblemError(str(path), f"no such file ({what})")
    if not path.is_file():
        raise ProblemError(str(path), f"not a regular file ({what})")
    return path


def _defined_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(top-level functions, every other top-level name: classes, assignments, imports)."""
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return functions, names


def check_candidate_file(path: str | Path) -> Path:
    """A candidate that exists, parses and has one of the two forms; ProblemError otherwise."""
    path = require_file(path, "candidate")
    try:
        source = read_source(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ProblemError(str(path), f"cannot read: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(str(path), f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    functions, names = _defined_names(tree)
    if "ModelNew" in names or "launch" in functions:
        return path
    if "ModelNew" in functions:
        raise ProblemError(str(path), f"ModelNew is a function, not a class; {CANDIDATE_FORMS}")
    raise ProblemError(str(path), f"defines neither class ModelNew nor launch(); {CANDIDATE_FORMS}")


__all__ = ["CANDIDATE_FORMS", "check_candidate_file", "require_file"]
