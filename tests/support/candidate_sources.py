"""Candidate and problem source texts that several tests write out or send as a model's reply."""

from __future__ import annotations

# The honest swish-and-bias model (tests/fixtures/candidates/gates/swish_fused.py in plain
# torch): what a hostile candidate ends with, so that only its harm differs from an honest one.
SWISH_MODEL = """
class ModelNew(nn.Module):
    def __init__(self, d, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x):
        return x * torch.sigmoid(x) * self.scale + self.bias
"""


def relu_kernel(name: str, block: int) -> str:
    """A Triton ReLU kernel ``name`` and the ``launch(x, y, n)`` that runs it in ``block``s."""
    return f"""\
import triton
import triton.language as tl


@triton.jit
def {name}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def launch(x, y, n):
    {name}[(triton.cdiv(n, {block}),)](x, y, n, BLOCK={block})
"""


def product_problem(m: int, k: int, n: int) -> str:
    """A KernelBench-format problem whose model is one ``(m, k) @ (k, n)`` product."""
    return f"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn({m}, {k}), torch.randn({k}, {n})]


def get_init_inputs():
    return []
"""
