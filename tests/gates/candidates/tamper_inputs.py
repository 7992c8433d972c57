"""Cheat -- an honest kernel that also rewrites the checker's input files on disk.

Every later process (the next candidate, the baseline's timing run) would load
what it left there: here, inputs of zeros, so the baseline times different
work.  The job file in the working directory says where the inputs live.
"""

import json
from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _poison_inputs() -> None:
    job = Path("job.json")
    if not job.is_file():
        return
    inputs = Path(json.loads(job.read_text())["inputs_dir"])
    for path in inputs.glob("*.pt"):
        values = torch.load(path, weights_only=True)
        if isinstance(values, list):
            torch.save([torch.zeros_like(v) if torch.is_tensor(v) else v for v in values], path)


_poison_inputs()


@triton.jit
def _swish_bias(x_ptr, b_ptr, y_ptr, n, d, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % d, mask=mask)
    tl.store(y_ptr + offs, x * tl.sigmoid(x) * scale + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _swish_bias[(triton.cdiv(n, 1024),)](
            x, self.bias, y, n, x.shape[-1], self.scale, BLOCK=1024
        )
        return y
