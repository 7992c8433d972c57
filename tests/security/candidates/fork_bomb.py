"""Attack: a fork bomb, capped at BAIT['cap'] forks (a missing limit fails the test, not the host)."""

import json
import os
import time

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


count, error = 0, ""
try:
    for _ in range(BAIT["cap"]):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        count += 1
except OSError as exc:
    error = f"{type(exc).__name__}: {exc}"
report(forks=count, error=error)
if error:
    raise RuntimeError(f"fork refused after {count} forks: {error}")


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
