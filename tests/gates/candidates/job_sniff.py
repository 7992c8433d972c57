"""Cheat -- reads the harness's job file in its working directory and skips work when timed."""

import json
from pathlib import Path

import torch

from tests.gates.candidates.swish_fused import ModelNew as _Honest


def _job_kind() -> str:
    try:
        return str(json.loads(Path("job.json").read_text()).get("job", ""))
    except (OSError, ValueError):
        return ""


_TIMED = _job_kind() == "timing"


class ModelNew(_Honest):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _TIMED:
            return torch.empty_like(x)
        return super().forward(x)
