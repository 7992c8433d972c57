"""A ``CompileResult`` for tests that read only the problem, not a real compile.

The wrapper, its args and inputs are one placeholder artifact, and the versions and
timings are fixed values.  ``gpu_name`` and ``mode`` are the fields the code under test
reads (a CPU or a GPU compile, the Inductor mode); any other field can be set by name.
"""

from __future__ import annotations

from typing import Any

from kernelopt.contracts import ArtifactRef
from kernelopt.contracts.compiled import CompileResult
from kernelopt.contracts.problem import ProblemSpec


def stub_compiled(
    problem: ProblemSpec,
    blob: ArtifactRef,
    gpu_name: str = "cpu",
    *,
    mode: str = "default",
    ms: float = 0.0,
    **fields: Any,
) -> CompileResult:
    """``problem`` compiled in name only: ``blob`` stands for the wrapper, args and inputs.

    ``ms`` is both the eager and the compiled time; ``fields`` override the rest.
    """
    values: dict[str, Any] = {
        "problem": problem,
        "cache_key": "test",
        "mode": mode,
        "torch_version": "test",
        "triton_version": "test",
        "gpu_name": gpu_name,
        "wrapper": blob,
        "args": blob,
        "inputs": blob,
        "eager_ms": ms,
        "compiled_ms": ms,
    }
    return CompileResult(**{**values, **fields})
