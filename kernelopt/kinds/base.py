"""One class per kind of problem, behind one base: what the rest of kernelopt asks of a problem.

A KernelBench module, a standalone Triton kernel and a Helion kernel differ in
how they are checked, loaded, compiled (captured) and searched by the built-in
proposer, and in where their baseline comes from.  Each kind answers those
questions itself, so no other module asks which kind a problem is: callers get
a ``Kind`` from ``kernelopt.kinds.registry`` (by the file's text or by the
recorded ``ProblemKind``) and call its methods.

What the kinds share is not here but in ``kernelopt.loaded_problem``: every
kind loads into a ``LoadedProblem`` (Model, ``get_inputs``, held-out inputs)
whose inputs and weights are drawn by the one seeding rule (``seeded``), and
which carries its kind as ``runtime`` for the gates' checks and baseline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from kernelopt.contracts.compiled import CompileInput, CompileResult
from kernelopt.contracts.problem import ProblemKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult
from kernelopt.loaded_problem import LoadedProblem
from kernelopt.problem import ProblemText
from kernelopt.store import ArtifactStore

Bench = Callable[[Callable[[], Any]], float]


class Kind(ABC):
    """A kind of problem: its checks, its loader, its compile step, its baseline, its variants."""

    kind: ClassVar[ProblemKind]

    @property
    def own_baseline(self) -> bool:
        """True when the file brings its own baseline (a kernel); False when it is compiled."""
        return self.kind.own_baseline

    @abstractmethod
    def check_source(self, source: str, label: str) -> None:
        """Text-only checks (``ast``, no torch): the CLI's millisecond validation."""

    @abstractmethod
    def load(self, text: ProblemText, name: str | None = None) -> LoadedProblem:
        """Import the file and check that it runs; a ``ProblemError`` when it does not."""

    @abstractmethod
    def compile(
        self, inp: CompileInput, store: ArtifactStore, device: str, bench: Bench
    ) -> CompileResult:
        """The compile step: capture the baseline as a ``CompileResult`` (cached by content)."""

    def baseline_label(self, compile_mode: str, quote: str = "`") -> str:
        """What a speedup is measured against, for reports and the CLI."""
        mode = f"({quote}{compile_mode}{quote})"
        if not self.own_baseline:
            return f"torch.compile {mode}"
        return f"the file's own {self.kind.value.capitalize()} kernel {mode}"

    def check_runtime(self, problem: LoadedProblem, device: str, seed: int) -> None:
        """Checks that need the device (memory, determinism) before the reference runs."""
        return None

    def baseline_model(self, problem: LoadedProblem, device: str, seed: int) -> Any:
        """The file's own baseline as a module; None when the baseline is compiled."""
        return None

    def builtin_variants(
        self, inp: BuiltinProposeInput, store: ArtifactStore
    ) -> BuiltinProposeResult | None:
        """The built-in proposer's variants of this kind's own launch space.

        None when the kind has none of its own: the proposer then searches the
        compiled wrapper's kernels (Inductor's launch space, templates, rewrites).
        """
        return None
