"""The two kernel kinds: a standalone Triton kernel and a Helion kernel.

Both are adapted to the module kind's shape (see ``kernelopt.kinds``): Model is
the file's ``reference``, the baseline is the file's own launcher, and the
built-in proposer walks the launcher's configuration space.  They share that
machinery (``problem``, ``validate``, ``baseline``, ``compile``, ``builtin``);
what differs between them is declared on the two classes.
"""

from __future__ import annotations

from typing import Any

from kernelopt.contracts.compiled import CompileInput, CompileResult
from kernelopt.contracts.problem import ProblemKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult
from kernelopt.errors import ProblemError
from kernelopt.kinds import baseline, builtin, validate
from kernelopt.kinds.base import Bench, Kind
from kernelopt.kinds.compile import compile_kernel_problem
from kernelopt.kinds.detect import check_kernel_source
from kernelopt.kinds.problem import load_kernel_problem
from kernelopt.loaded_problem import KernelProblem, LoadedProblem
from kernelopt.problem import ProblemText, problem_text
from kernelopt.store import ArtifactStore


class KernelKind(Kind):
    """A problem whose file is a kernel with its launcher and a reference."""

    def check_source(self, source: str, label: str) -> None:
        check_kernel_source(source, label)

    def load(self, text: ProblemText, name: str | None = None) -> LoadedProblem:
        return load_kernel_problem(text.path, text.source, text.label, name).as_loaded(self)

    def compile(
        self, inp: CompileInput, store: ArtifactStore, device: str, bench: Bench
    ) -> CompileResult:
        source = store.get_text(inp.problem.source)
        text = problem_text(source, inp.problem.path or inp.problem.name)
        problem = load_kernel_problem(text.path, source, text.label, inp.problem.name)
        return compile_kernel_problem(inp, problem, store, device, bench)

    def check_runtime(self, problem: LoadedProblem, device: str, seed: int) -> None:
        validate.check_runtime(_kernel(problem), device, seed)

    def baseline_model(self, problem: LoadedProblem, device: str, seed: int) -> Any:
        return baseline.baseline_model(_kernel(problem), device, seed)

    def builtin_variants(
        self, inp: BuiltinProposeInput, store: ArtifactStore
    ) -> BuiltinProposeResult:
        return builtin.propose(inp, store)


class TritonKind(KernelKind):
    """``@triton.jit`` kernel(s), ``launch(*inputs)``, ``reference(*inputs)``, ``get_inputs()``."""

    kind = ProblemKind.TRITON


class HelionKind(KernelKind):
    """``@helion.kernel`` function(s), ``reference(*inputs)``, ``get_inputs()``."""

    kind = ProblemKind.HELION


def _kernel(problem: LoadedProblem) -> KernelProblem:
    if not isinstance(problem.kernel, KernelProblem):
        raise ProblemError(problem.path, "not loaded as a kernel problem")
    return problem.kernel
