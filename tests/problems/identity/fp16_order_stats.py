"""Median, k-th value and running-minimum indices among near-tied fp16 scores: which of two
nearly equal scores ranks k-th depends on the precision they were computed in."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        scores = torch.cos(40 * x) * 2
        middle = torch.median(scores, dim=1)
        fifth = torch.kthvalue(scores, 5, dim=1)
        low = torch.cummin(scores, dim=1)
        return middle.values, middle.indices, fifth.values, fifth.indices, low.indices


def get_inputs():
    return [torch.rand(256, 48, dtype=torch.float16)]


def get_init_inputs():
    return []
