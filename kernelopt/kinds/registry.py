"""The kinds by name, and the entry points every caller uses: load, check, compile.

``kind_for`` reads which kind a file is from its text (``detect``: decorators
and classes, no import); ``kind_named`` maps a recorded ``ProblemKind`` back
to its class.  ``load_problem`` is the one loader of every kind -- the compile
step, the gate children (``gates.problem_io``), preflight and the CLI all go
through it -- and ``compile_problem`` is the compile activity's entry point.
Importing this module imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelopt.compile.timing import bench_ms, require_cuda
from kernelopt.contracts.compiled import CompileInput, CompileResult
from kernelopt.contracts.problem import ProblemKind
from kernelopt.kinds.base import Kind
from kernelopt.kinds.detect import detect_kind
from kernelopt.kinds.kernel import HelionKind, TritonKind
from kernelopt.kinds.module import ModuleKind
from kernelopt.loaded_problem import LoadedProblem
from kernelopt.precision import strict_fp32
from kernelopt.problem import problem_text, read_problem_file
from kernelopt.pyfile import read_source
from kernelopt.store import ArtifactStore

KINDS: dict[ProblemKind, Kind] = {k.kind: k for k in (ModuleKind(), TritonKind(), HelionKind())}


def kind_named(kind: ProblemKind | str) -> Kind:
    """The class of a recorded kind (``ProblemSpec.kind``)."""
    return KINDS[ProblemKind(kind)]


def kind_for(source: str) -> Kind:
    """The kind of a problem's text; text that does not parse is a module (checked later)."""
    return KINDS[detect_kind(source)]


def kind_of_file(path: str | Path) -> Kind:
    """The kind of the file at ``path``, for display; a file that cannot be read is a module.

    (As text that does not parse is: whatever reads the file to run it checks it then.)
    """
    try:
        return kind_for(read_source(Path(path)))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return KINDS[ProblemKind.MODULE]


def check_problem_file(path: str | Path) -> Kind:
    """Cheap validation for the CLI (no torch): the file exists, parses and fits its kind.

    Returns the kind, so a caller that records it does not detect it again.
    """
    path = Path(path)
    source = read_problem_file(path)
    kind = kind_for(source)
    kind.check_source(source, str(path))
    return kind


def load_problem(path_or_source: str | Path, name: str | None = None) -> LoadedProblem:
    """Import a problem of any kind (a path, or the source text itself) and check that it runs."""
    text = problem_text(path_or_source, name)
    return kind_for(text.source).load(text, name)


def compile_on(
    inp: CompileInput,
    store: ArtifactStore,
    device: str,
    bench: Callable[[Callable[[], Any]], float],
) -> CompileResult:
    """``compile_problem`` on any device with any timer (CPU tests use ``device="cpu"``)."""
    strict_fp32()  # before any compile: autotuning must choose for the numerics the gates run
    source = store.get_text(inp.problem.source)
    return kind_for(source).compile(inp, store, device, bench)


def compile_problem(inp: CompileInput, store: ArtifactStore) -> CompileResult:
    """Activity entry point: the baseline of ``inp.problem``, compiled by its kind (cached)."""
    require_cuda()
    return compile_on(inp, store, "cuda", bench_ms)


__all__ = [
    "KINDS",
    "check_problem_file",
    "compile_on",
    "compile_problem",
    "kind_for",
    "kind_named",
    "kind_of_file",
    "load_problem",
]
