"""The KernelBench module kind: ``class Model`` + ``get_inputs`` + ``get_init_inputs``.

What the compile step, segmentation, the search and the four gates were built
for: its loader is ``kernelopt.problem``, its compile step Inductor's capture
(``kernelopt.compile.capture``), its baseline ``torch.compile(Model)``, and the
built-in proposer searches the captured wrapper's kernels.
"""

from __future__ import annotations

from dataclasses import replace

from kernelopt.compile.capture import compile_module
from kernelopt.contracts.compiled import CompileInput, CompileResult
from kernelopt.contracts.problem import ProblemKind
from kernelopt.kinds.base import Bench, Kind
from kernelopt.loaded_problem import LoadedProblem
from kernelopt.problem import ProblemText, check_problem_source, load_module_file
from kernelopt.store import ArtifactStore


class ModuleKind(Kind):
    """A KernelBench ``nn.Module`` problem."""

    kind = ProblemKind.MODULE

    def check_source(self, source: str, label: str) -> None:
        check_problem_source(source, label)

    def load(self, text: ProblemText, name: str | None = None) -> LoadedProblem:
        return replace(load_module_file(text, name), runtime=self)

    def compile(
        self, inp: CompileInput, store: ArtifactStore, device: str, bench: Bench
    ) -> CompileResult:
        return compile_module(inp, store, device, bench)
