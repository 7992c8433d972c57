"""scripts/cpu_kernel_count: Inductor's Triton launches read without a GPU."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

from scripts.cpu_kernel_count import count

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w):
        y = torch.relu(x @ w)  # a library GEMM, then one pointwise kernel
        return torch.softmax(y, dim=-1) + y.sum()  # reductions: more launches


def get_inputs():
    return [torch.randn(8, 16), torch.randn(16, 32)]


def get_init_inputs():
    return []
"""


def test_the_generated_wrapper_is_read_and_its_launches_counted(tmp_path: Path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    # a process of its own, as a maintainer runs it: nothing another test compiled applies
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    run = subprocess.run(
        [sys.executable, "-m", "scripts.cpu_kernel_count", "--full", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = re.search(r"launches (\d+), distinct kernels (\d+)", run.stdout)
    assert run.returncode == 0 and found, run.stdout + run.stderr[-2000:]
    launches, distinct = int(found[1]), int(found[2])
    assert 2 <= launches <= 6 and 1 <= distinct <= launches


def test_the_process_compiles_as_before_afterwards(tmp_path: Path) -> None:
    import torch
    import torch._inductor.config as inductor_config

    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    names = ("cpu_backend", "fx_graph_cache", "force_disable_caches", "cpp_wrapper")
    before = [getattr(inductor_config, name) for name in names]
    with contextlib.suppress(RuntimeError):  # what it counts is the test above's concern
        count(path, small=False)
    assert [getattr(inductor_config, name) for name in names] == before
    assert inductor_config.cpu_backend != "triton"
    x = torch.randn(4, 4)
    torch.testing.assert_close(torch.compile(lambda t: torch.relu(t) * 2)(x), torch.relu(x) * 2)
