"""Which kind of problem a file is, and the checks that need nothing but its text.

Pure ``ast`` work, no torch or triton import: ``kernelopt optimize`` runs these
before it submits a campaign, so a missing ``reference`` or a launcher whose
parameters do not line up with it fails in milliseconds, on the machine the
user is typing on, with the file and the reason in the message.

Detection reads decorators, not substrings: a comment mentioning
``@triton.jit`` or an unused ``import helion`` does not change the kind.

* a top-level ``class Model`` -> a KernelBench module (even if it also
  defines Triton kernels: that is a module problem written with them);
* a top-level function decorated with ``helion.kernel`` -> Helion;
* a top-level function decorated with ``triton.jit`` -> standalone Triton;
* anything else -> module, so the module checker names what is missing.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field

from kernelopt.compile.wrapper_parse import dotted
from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError

HELION_INSTALL_HINT = (
    "the `helion` package is not installed here; add it with "
    "`pip install 'kernelopt[helion]'` (or `pip install helion`) on every machine that runs "
    "campaign workers, then submit again"
)
REQUIRED = {
    ProblemKind.TRITON: ("reference", "launch", "get_inputs"),
    ProblemKind.HELION: ("reference", "get_inputs"),
}


@dataclass
class Params:
    """The positional parameters of a ``def`` as written (``ast``) or as run (``inspect``)."""

    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)  # positional with defaults
    varargs: bool = False
    keyword_only: dict[str, object] = field(default_factory=dict)  # name -> default (literal)

    @property
    def positional(self) -> list[str]:
        return [*self.required, *self.optional]

    def accepts(self, count: int) -> bool:
        """Can ``count`` positional values be passed?"""
        return len(self.required) <= count and (self.varargs or count <= len(self.positional))

    def text(self) -> str:
        parts = [*self.required, *(f"{p}=..." for p in self.optional)]
        if self.varargs:
            parts.append("*args")
        return "(" + ", ".join(parts) + ")"


@dataclass
class SourceInfo:
    """What the text of a kernel problem declares at top level."""

    kind: ProblemKind
    functions: dict[str, ast.FunctionDef]
    triton_kernels: list[str]
    helion_kernels: list[str]
    classes: list[str]
    assigned: set[str]


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the qualified name it stands for (``import triton as t`` -> t: triton)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _decorator_names(func: ast.FunctionDef, aliases: dict[str, str]) -> list[str]:
    names = []
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = dotted(target)
        if not name:
            continue
        head, _, rest = name.partition(".")
        qualified = aliases.get(head, head)
        names.append(f"{qualified}.{rest}" if rest else qualified)
    return names


def scan(source: str, label: str = "<problem>") -> SourceInfo:
    """Parse ``source`` and classify it; a syntax error is a ``ProblemError``."""
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as exc:
        raise ProblemError(label, f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    aliases = _aliases(tree)
    functions: dict[str, ast.FunctionDef] = {}
    triton_kernels: list[str] = []
    helion_kernels: list[str] = []
    classes: list[str] = []
    assigned: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes.append(node.name)
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
            decorators = _decorator_names(node, aliases)
            if any(d in ("helion.kernel", "helion.runtime.kernel.kernel") for d in decorators):
                helion_kernels.append(node.name)
            elif any(d == "triton.jit" or d.startswith("triton.runtime.jit") for d in decorators):
                triton_kernels.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned.update(t.id for t in targets if isinstance(t, ast.Name))
    if "Model" in classes or "Model" in assigned:  # ``Model = TinyNet`` names the module
        kind = ProblemKind.MODULE
    elif helion_kernels:
        kind = ProblemKind.HELION
    elif triton_kernels:
        kind = ProblemKind.TRITON
    else:
        kind = ProblemKind.MODULE
    return SourceInfo(kind, functions, triton_kernels, helion_kernels, classes, assigned)


def detect_kind(source: str) -> ProblemKind:
    """The kind of a problem file; text that does not parse counts as a module (checked later)."""
    try:
        return scan(source).kind
    except ProblemError:
        return ProblemKind.MODULE


def params_of(func: ast.FunctionDef) -> Params:
    args = [*func.args.posonlyargs, *func.args.args]
    n_defaults = len(func.args.defaults)
    split = len(args) - n_defaults
    keyword_only: dict[str, object] = {}
    for arg, default in zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True):
        value: object = None
        if default is not None:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                value = None
        keyword_only[arg.arg] = value
    return Params(
        required=[a.arg for a in args[:split]],
        optional=[a.arg for a in args[split:]],
        varargs=func.args.vararg is not None,
        keyword_only=keyword_only,
    )


def compare_params(launcher: str, ours: Params, reference: Params) -> str | None:
    """Why a launcher cannot take what ``reference`` takes, or None when they agree.

    Both receive the same ``get_inputs()`` values positionally, so the
    parameters without defaults must agree by name and order (a swapped
    pair is the bug this catches); ``*args`` on either side skips the names.
    """
    if ours.varargs or reference.varargs:
        return None
    if ours.required == reference.required:
        return None
    return (
        f"{launcher}{ours.text()} does not match reference{reference.text()}: both are called "
        "with the same get_inputs() values, so their parameters without defaults must have the "
        f"same names in the same order ({launcher}: {', '.join(ours.required) or 'none'}; "
        f"reference: {', '.join(reference.required) or 'none'})"
    )


def helion_available() -> bool:
    return importlib.util.find_spec("helion") is not None


def check_kernel_source(source: str, label: str = "<problem>") -> SourceInfo:
    """AST-only validation of a Triton or Helion kernel problem (see the README's format)."""
    info = scan(source, label)
    if info.kind == ProblemKind.MODULE:
        raise ProblemError(label, "not a kernel problem: no @triton.jit or @helion.kernel function")
    for name in REQUIRED[info.kind]:
        if name not in info.functions:
            what = "is defined but not as a function" if name in info.assigned else "is missing"
            raise ProblemError(label, f"top-level function {name}() {what} ({_format_hint(info)})")
    if "ModelNew" in info.classes:
        raise ProblemError(
            label, "a problem file must not define ModelNew (that is what candidates define)"
        )
    reference = params_of(info.functions["reference"])
    if info.kind == ProblemKind.HELION:
        if not helion_available():
            raise ProblemError(label, f"this is a Helion kernel problem, but {HELION_INSTALL_HINT}")
        if "launch" not in info.functions and len(info.helion_kernels) > 1:
            raise ProblemError(
                label,
                f"{len(info.helion_kernels)} @helion.kernel functions "
                f"({', '.join(info.helion_kernels)}) and no launch(): define launch(*inputs) "
                "that calls them",
            )
    launcher = "launch" if "launch" in info.functions else info.helion_kernels[0]
    ours = params_of(info.functions[launcher])
    if info.kind == ProblemKind.TRITON:
        bad = [k for k, v in ours.keyword_only.items() if v is None]
        if bad:
            raise ProblemError(
                label,
                f"launch() has keyword-only parameter(s) without a default ({', '.join(bad)}): "
                "keyword-only parameters are its launch configuration and need defaults",
            )
    mismatch = compare_params(launcher, ours, reference)
    if mismatch:
        raise ProblemError(label, mismatch)
    return info


def _format_hint(info: SourceInfo) -> str:
    if info.kind == ProblemKind.HELION:
        return (
            "a Helion problem defines @helion.kernel function(s), reference(*inputs), "
            "get_inputs() and optionally launch(*inputs)"
        )
    return (
        "a standalone Triton problem defines @triton.jit kernel(s), launch(*inputs), "
        "reference(*inputs) and get_inputs()"
    )
