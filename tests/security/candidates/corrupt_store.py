"""Attack: corrupt a blob of the artifact store and plant a new one."""

import json
import os

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


report(started=True)
try:
    with open(BAIT["blob"], "r+b") as handle:
        handle.write(b"poisoned")
finally:
    with open(os.path.join(os.path.dirname(BAIT["blob"]), "planted"), "wb") as handle:
        handle.write(b"planted")


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
