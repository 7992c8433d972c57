"""Kernel-problem tests: a private KERNELOPT_HOME, and the Triton interpreter for every kernel.

Kernels run on CPU tensors here, in this process (compile step, baselines)
and in gate children (which set ``TRITON_INTERPRET=1`` themselves).  Triton
picks the interpreter when a ``@triton.jit`` function is *decorated*, so the
variable is set for every test module of this package before any problem
file is imported, and restored afterwards so other packages never see it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROBLEMS = ROOT / "tests" / "problems" / "kinds"
CANDIDATES = ROOT / "tests" / "fixtures" / "candidates" / "kinds"


@pytest.fixture(scope="module", autouse=True)
def kinds_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("kinds-home")
    with pytest.MonkeyPatch.context() as env:  # restored when the module is done
        env.setenv("KERNELOPT_HOME", str(home))
        env.setenv("TRITON_INTERPRET", "1")
        env.setenv("KERNELOPT_GATES_SMALL", "1")
        yield home


def helion_or_skip() -> None:
    from kernelopt.kinds import helion_available

    if not helion_available():
        pytest.skip("helion is not installed (pip install 'kernelopt[helion]')")


_COMPILE_CHILD = """
import sys
from pathlib import Path
from kernelopt.campaigns import prepare_problem
from kernelopt.kinds.registry import compile_on
from kernelopt.contracts import CompileInput
from kernelopt.store import open_store

store = open_store(Path(sys.argv[2]))
spec = prepare_problem(Path(sys.argv[1]), store)
result = compile_on(CompileInput(problem=spec), store, "cpu", lambda fn: (fn(), 1.0)[1])
Path(sys.argv[3]).write_text(result.model_dump_json())
"""


def compile_in_child(problem: Path, home: Path) -> object:
    """The compile step in a fresh interpreter that starts with ``TRITON_INTERPRET=1``.

    Helion's generated kernels call Triton's library functions (``tl.cdiv``),
    which only run under the interpreter when Triton itself was imported with
    it on -- not the case in a pytest process where other packages imported
    Triton first.  (Gate children always start that way.)
    """
    from kernelopt.contracts import CompileResult

    out = home / f"compiled-{problem.stem}.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "KERNELOPT_HOME": str(home)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILE_CHILD, str(problem), str(home / "artifacts"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"compile child failed:\n{proc.stderr[-3000:]}")
    return CompileResult.model_validate_json(out.read_text())
