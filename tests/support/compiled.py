"""A ``CompileResult`` for tests of the forward (whole-model) path on the CPU.

Those tests read only the problem; the wrapper, its args and inputs are one
placeholder artifact, and the versions and timings are fixed values.
"""

from __future__ import annotations

from kernelopt.contracts import ArtifactRef
from kernelopt.contracts.compiled import CompileResult
from kernelopt.contracts.problem import ProblemSpec


def forward_compiled(
    problem: ProblemSpec, blob: ArtifactRef, gpu_name: str = "cpu"
) -> CompileResult:
    """``problem`` compiled in name only: ``blob`` stands for the wrapper, args and inputs."""
    return CompileResult(
        problem=problem,
        cache_key="test",
        mode="default",
        torch_version="test",
        triton_version="test",
        gpu_name=gpu_name,
        wrapper=blob,
        args=blob,
        inputs=blob,
        eager_ms=0.0,
        compiled_ms=0.0,
    )
