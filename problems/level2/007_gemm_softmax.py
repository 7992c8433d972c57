"""Linear (1024 -> 4096, a classifier head) on 4096 rows followed by softmax over classes.

Category: GEMM + softmax.
Why it is interesting: the softmax reads the 64 MiB logits twice in a naive
implementation; after cuBLAS, only the softmax kernel is searchable.
"""

import torch
import torch.nn as nn

BATCH, IN_FEATURES, CLASSES = 4096, 1024, 4096


class Model(nn.Module):
    def __init__(self, in_features: int, classes: int):
        super().__init__()
        self.head = nn.Linear(in_features, classes)

    def forward(self, x):
        return torch.softmax(self.head(x), dim=-1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_holdout_inputs():
    return [[torch.randn(16, IN_FEATURES)], [torch.randn(1000, IN_FEATURES)]]


def get_init_inputs():
    return [IN_FEATURES, CLASSES]
