"""Kernel-problem tests: a private KERNELOPT_HOME, and the Triton interpreter for every kernel.

Kernels run on CPU tensors here, in this process (compile step, baselines)
and in gate children (which set ``TRITON_INTERPRET=1`` themselves).  Triton
picks the interpreter when a ``@triton.jit`` function is *decorated*, so the
variable is set for every test module of this package before any problem
file is imported, and restored afterwards so other packages never see it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE / "problems"
CANDIDATES = HERE / "candidates"
ROOT = HERE.parents[1]


@pytest.fixture(scope="module", autouse=True)
def kinds_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("kinds-home")
    keys = ("KERNELOPT_HOME", "TRITON_INTERPRET", "KERNELOPT_GATES_SMALL")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(
        {"KERNELOPT_HOME": str(home), "TRITON_INTERPRET": "1", "KERNELOPT_GATES_SMALL": "1"}
    )
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def helion_or_skip() -> None:
    from kernelopt.kinds import helion_available

    if not helion_available():
        pytest.skip("helion is not installed (pip install 'kernelopt[helion]')")
