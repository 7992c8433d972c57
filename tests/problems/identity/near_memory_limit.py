"""A model whose eager intermediates fill most of an H200's memory (GPU only).

The inputs are small (a column and a row), but eager broadcasting makes two
6144 x 2**20 intermediates alive at once: ~52 GB in float32 and ~103 GB in
the float64 reference, about 70% of the H200's 141 GB.  Verification must get
through without running out of memory.  Far too large for the CPU suite:
skipped there (``KERNELOPT_GPU_ONLY``).
"""

import torch
import torch.nn as nn

KERNELOPT_GPU_ONLY = True
ROWS, COLS = 6144, 2**20


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.exp(-((a - b) ** 2)).sum(dim=0)


def get_inputs():
    return [torch.randn(ROWS, 1), torch.randn(1, COLS)]


def get_init_inputs():
    return []
