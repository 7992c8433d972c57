"""Cheat -- an honest kernel that also overwrites a kept reference's outputs with zeros.

Unsandboxed, the kept bundle's ``refs/`` lies beside the inputs its job names;
a later candidate that returns zeros would then match a forged reference.
"""

import json
from pathlib import Path

import torch


def _zero_refs() -> None:
    job = Path("job.json")
    if not job.is_file():
        return
    refs = Path(json.loads(job.read_text())["inputs_dir"]).parent / "refs"
    for path in refs.glob("*.pt"):
        values = torch.load(path, weights_only=True)
        torch.save([torch.zeros_like(v) if torch.is_tensor(v) else v for v in values], path)


_zero_refs()

# the honest kernel itself: only the cheat above differs
from tests.gates.candidates.swish_fused import ModelNew  # noqa: E402, F401
