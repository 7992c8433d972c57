"""Cheat -- an honest kernel that also rewrites the checker's input files on disk.

Every later process (the next candidate, the baseline's timing run) would load
what it left there: here, inputs of zeros, so the baseline times different
work.  The job file in the working directory says where the inputs live.
"""

import json
from pathlib import Path

import torch


def _poison_inputs() -> None:
    job = Path("job.json")
    if not job.is_file():
        return
    inputs = Path(json.loads(job.read_text())["inputs_dir"])
    for path in inputs.glob("*.pt"):
        values = torch.load(path, weights_only=True)
        if isinstance(values, list):
            torch.save([torch.zeros_like(v) if torch.is_tensor(v) else v for v in values], path)


_poison_inputs()

# the honest kernel itself: only the cheat above differs
from tests.gates.candidates.swish_fused import ModelNew  # noqa: E402, F401
