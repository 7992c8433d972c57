"""Row sums of a matrix; no get_holdout_inputs, so the checker derives another batch size."""

import os

import torch
import torch.nn as nn

SMALL = os.environ.get("KERNELOPT_GATES_SMALL") == "1"
B, D = (8, 64) if SMALL else (4096, 1024)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def get_init_inputs():
    return []


def get_inputs():
    return [torch.randn(B, D)]
