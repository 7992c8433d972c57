"""Attack: plant a module on every writable import path, for a later gate child to import.

A later child of the same sandbox (the reference, the baseline's timing, the
next candidate) that imports a module the zygote had not loaded yet would run
the planted code as trusted code.  ``BAIT["probe"]`` asks, instead, whether a
module planted by an earlier attack can now be found.
"""

import importlib.util
import json
import os
import sys

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


if BAIT.get("probe"):
    spec = importlib.util.find_spec(BAIT["name"])
    report(started=True, found=spec.origin if spec else None)
else:
    planted = []
    for entry in sys.path:  # "" is the working directory
        try:
            with open(os.path.join(entry or os.getcwd(), BAIT["name"] + ".py"), "w") as handle:
                handle.write("PLANTED = True\n")
            planted.append(entry)
        except OSError:
            pass
    report(started=True, planted=planted, path=sys.path)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
