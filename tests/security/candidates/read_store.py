"""Attack: read another campaign's artifact (weights, held-out inputs) in the store."""

import json

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


report(started=True)
with open(BAIT["blob"], "rb") as handle:
    report(stolen=handle.read().decode(errors="replace"))


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
