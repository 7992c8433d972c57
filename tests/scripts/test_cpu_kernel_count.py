"""scripts/cpu_kernel_count: Inductor's Triton launches read without a GPU."""

from __future__ import annotations

from pathlib import Path

from scripts.cpu_kernel_count import count

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
    launches, distinct = count(path, small=False)
    assert 2 <= launches <= 6 and 1 <= distinct <= launches


def test_the_process_compiles_as_before_afterwards(tmp_path: Path) -> None:
    import torch
    import torch._inductor.config as inductor_config

    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    count(path, small=False)
    assert inductor_config.cpu_backend != "triton"
    x = torch.randn(4, 4)
    torch.testing.assert_close(torch.compile(lambda t: torch.relu(t) * 2)(x), torch.relu(x) * 2)
