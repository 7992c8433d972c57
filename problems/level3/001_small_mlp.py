"""Four-layer MLP 1024 -> 2048 -> 2048 -> 1024 -> 256 with GELU, batch 2048.

Category: small model (stack of GEMM + epilogue).
Why it is interesting: four library GEMMs and three small activation kernels;
library fraction is high, so the realistic outcome is "matched" or a small win
from fusing activations into GEMM epilogues.
"""

import itertools

import torch
import torch.nn as nn

BATCH = 2048
WIDTHS = [1024, 2048, 2048, 1024, 256]


class Model(nn.Module):
    def __init__(self, widths: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        for i, (w_in, w_out) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(w_in, w_out))
            if i < len(widths) - 2:
                layers.append(nn.GELU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, WIDTHS[0])]


def get_holdout_inputs():
    return [[torch.randn(1, WIDTHS[0])], [torch.randn(333, WIDTHS[0])]]


def get_init_inputs():
    return [WIDTHS]
