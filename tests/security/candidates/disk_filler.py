"""Attack: fill the disk, capped at BAIT['cap_mb'] MB a file (a missing limit fails the test)."""

import json
import os

import torch
import torch.nn as nn

BAIT: dict = {}  # filled in by the test: paths, ports, tokens


def report(**found: object) -> None:
    """What the attack saw, in the scratch directory (the only place it may write)."""
    with open("report.json", "w") as handle:
        json.dump(found, handle, default=str)


chunk = b"x" * 2**20
errors = {}
for path in ("fill.bin", "/tmp/fill.bin"):
    try:
        with open(path, "wb") as handle:
            for _ in range(BAIT["cap_mb"]):
                handle.write(chunk)
                handle.flush()
    except OSError as exc:
        errors[path] = f"{type(exc).__name__}: {exc}"
report(errors=errors, sizes={p: os.path.getsize(p) for p in ("fill.bin", "/tmp/fill.bin")})
if errors:
    raise OSError(f"disk writes refused: {errors}")


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
