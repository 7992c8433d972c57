"""Cheat -- a row-sum kernel whose grid is computed for the problem's one batch size."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from tests.gates.problems.row_sums import B


@triton.jit
def _row_sum(x_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * d + offs, mask=offs < d, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = x.shape[1]
        y = torch.empty(B, device=x.device, dtype=x.dtype)
        _row_sum[(B,)](x, y, d, BLOCK=triton.next_power_of_2(d))
        return y
