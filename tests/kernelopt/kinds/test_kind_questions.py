"""No module outside the kinds asks which kind a problem is (issue 27 point 1).

Each kind answers for itself (``kernelopt.kinds``), and what workflows and the
compile step need to know without importing a kind is a named capability of
``ProblemKind`` (``kernelopt.contracts.problem``): ``own_baseline``,
``whole_forward_only``, ``inductor_variants``.  A caller asks the capability;
it never compares a kind with one of its members.  This test reads the source
(``ast``, nothing imported) and names every place that does.

What counts as asking: ``==``/``!=``/``is``/``in`` against ``ProblemKind.<member>``
(under any name it was imported as) or against a kind's value spelled as a
string (``kind == "triton"``), a ``case ProblemKind.<member>:``, an ``isinstance``
check against one of the kind classes, and picking a kind by its name
(``kind_named("module")``, ``KINDS[ProblemKind.MODULE]``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from kernelopt.contracts.problem import ProblemKind
from tests.support.paths import ROOT

SCANNED = ("kernelopt", "gates", "activities", "workflows", "worker.py")
# where the kinds are told apart: the kind classes themselves, and the capabilities' table
ALLOWED = ("kernelopt/kinds/", "kernelopt/contracts/problem.py")
KIND_CLASSES = {"Kind", "KernelKind", "ModuleKind", "TritonKind", "HelionKind"}
VALUES = {k.value for k in ProblemKind}


def _sources() -> Iterator[Path]:
    for name in SCANNED:
        path = ROOT / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _aliases(tree: ast.Module) -> set[str]:
    """The names ``ProblemKind`` goes by in a module (``import ... as``, the package's name)."""
    names = {"ProblemKind"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.name == "ProblemKind" and a.asname}
    return names


def _is_member(node: ast.expr, aliases: set[str]) -> bool:
    """``ProblemKind.MODULE`` (also ``contracts.ProblemKind.MODULE``), or a tuple of them."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_member(e, aliases) for e in node.elts)
    if not isinstance(node, ast.Attribute) or node.attr not in ProblemKind.__members__:
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id in aliases) or (
        isinstance(owner, ast.Attribute) and owner.attr in aliases
    )


def _names_kind(node: ast.expr) -> bool:
    """An expression that reads a kind: ``kind``, ``problem.kind``, ``x.kind.value``."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name == "kind"


def _is_value(node: ast.expr) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_value(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value in VALUES


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _offences(tree: ast.Module) -> Iterator[tuple[int, str]]:
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_member(s, aliases) for s in sides):
                yield node.lineno, "compares with a ProblemKind member"
            elif any(_is_value(s) for s in sides) and any(_names_kind(s) for s in sides):
                yield node.lineno, "compares a kind with a kind's name"
        elif isinstance(node, ast.MatchValue) and _is_member(node.value, aliases):
            yield node.lineno, "matches a ProblemKind member"
        elif isinstance(node, ast.Call) and _called(node) == "kind_named" and node.args:
            if _is_member(node.args[0], aliases) or _is_value(node.args[0]):
                yield node.lineno, "picks a kind by its name"
        elif isinstance(node, ast.Subscript) and _is_member(node.slice, aliases):
            yield node.lineno, "picks a kind by its name"
        elif isinstance(node, ast.Call) and _called(node) == "isinstance" and len(node.args) == 2:
            classes = node.args[1]
            elts = classes.elts if isinstance(classes, ast.Tuple) else [classes]
            if any(isinstance(e, ast.Name) and e.id in KIND_CLASSES for e in elts):
                yield node.lineno, "checks which kind class a kind is"


def _parse(path: Path, rel: str) -> ast.Module:
    """``ast.parse``, once more after CPython 3.11's spurious "AST constructor recursion
    depth mismatch" SystemError (python/cpython#106905), which a loaded run hit once."""
    text = path.read_text(encoding="utf-8")
    try:
        return ast.parse(text, filename=rel)
    except SystemError:
        return ast.parse(text, filename=rel)


def test_no_module_outside_the_kinds_asks_which_kind_a_problem_is() -> None:
    offenders = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(ALLOWED):
            continue
        tree = _parse(path, rel)
        offenders += [f"{rel}:{line}: {what}" for line, what in _offences(tree)]
    assert not offenders, (
        "ask the kind's capability (a ProblemKind property, or a Kind method) instead of "
        "which kind it is:\n" + "\n".join(offenders)
    )


def test_the_scan_sees_each_way_of_asking() -> None:
    """The scan itself: each spelling is found, and a capability question is not."""
    asking = """
from kernelopt.contracts.problem import ProblemKind as PK
from kernelopt import contracts
a = problem.kind == PK.MODULE
b = kind in (contracts.ProblemKind.TRITON, contracts.ProblemKind.HELION)
c = compiled.problem.kind.value != "helion"
match kind:
    case PK.HELION:
        pass
d = isinstance(k, ModuleKind)
e = registry.kind_named("module")
f = KINDS[PK.TRITON]
"""
    found = sorted(line for line, _ in _offences(ast.parse(asking)))
    assert found == [4, 5, 6, 8, 10, 11, 12]
    capability = """
a = compiled.problem.kind.whole_forward_only
b = event.kind == "library" or target.kind == TargetKind.FORWARD
c = backend == "triton"
d = kind_named(compiled.problem.kind).builtin_variants(inp, store)
"""
    assert list(_offences(ast.parse(capability))) == []
