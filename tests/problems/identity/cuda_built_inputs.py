"""get_inputs builds its tensors on CUDA, as many public problems do (``.cuda()``).

A CPU-only torch cannot build them: the CPU corpus run skips it (``KERNELOPT_GPU_ONLY``).
"""

import torch
import torch.nn as nn

KERNELOPT_GPU_ONLY = True


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8).cuda()]


def get_init_inputs():
    return []
