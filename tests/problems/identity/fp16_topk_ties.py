"""Top-k and sort indices among near-tied fp16 scores: which of two nearly equal scores
comes first depends on the precision they were computed in."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scores = torch.sin(50 * x) * 3
        values, indices = torch.topk(scores, 4, dim=1)
        order = torch.argsort(scores[:, :8], dim=0, descending=True)
        return values, indices, order


def get_inputs():
    return [torch.randn(256, 64, dtype=torch.float16)]


def get_init_inputs():
    return []
