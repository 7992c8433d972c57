"""Attack: read host files outside the job's view (/etc/passwd, /root, /home)."""

import json
import os

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


seen = {d: os.listdir(d) for d in ("/root", "/home", "/etc") if os.path.isdir(d)}
report(seen=seen)
with open("/etc/passwd") as handle:
    report(seen=seen, stolen=handle.read())


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
