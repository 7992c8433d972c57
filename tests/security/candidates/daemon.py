"""Attack: leave a detached daemon running after the job (it would skew later timings)."""

import json
import subprocess
import sys

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(120)", BAIT["token"]],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
report(started=True)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
