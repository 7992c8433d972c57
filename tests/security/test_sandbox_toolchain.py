"""An honest candidate can still use the host's C++ compiler inside the sandbox.

torch's inline-extension builder runs the compiler named by ``CXX`` (else the bare
``c++``) from a build directory under the candidate's ``/tmp``; gcc called by bare name
from there placed itself relative to that directory and could not find ``cc1plus``, so
every ``load_inline`` candidate failed at import.  The sandbox names the compiler by its
absolute path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gates.protocol import CandidateJob, InputSet, ModelSource
from gates.runner import run_job
from gates.sandbox import REPO_ROOT
from gates.zygote import Zygote

PROBLEM = REPO_ROOT / "tests" / "problems" / "gates" / "swish_bias.py"

COMPILES = """
import json
import os
import subprocess

import torch
import torch.nn as nn

build = "/tmp/ext_build"  # where torch's builder works: a directory below the private /tmp
os.makedirs(build, exist_ok=True)
with open(os.path.join(build, "f.cpp"), "w") as handle:
    handle.write("int f() { return 1; }\\n")
done = subprocess.run(
    [os.environ.get("CXX", "c++"), "-c", "f.cpp", "-o", "f.o"],
    cwd=build, capture_output=True, text=True,
)
with open("report.json", "w") as handle:
    json.dump({"rc": done.returncode, "stderr": done.stderr[-500:]}, handle)


class ModelNew(nn.Module):
    def __init__(self, d: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias
"""


@pytest.mark.parametrize("launch", ["spawned", "forked"])
def test_a_candidate_compiles_cpp_as_torchs_extension_builder_does(
    zygote: Zygote, tmp_path: Path, launch: str
) -> None:
    candidate = tmp_path / "compiles.py"
    candidate.write_text(COMPILES)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    torch.save([torch.randn(8, 64)], inputs / "seed0.pt")
    job = CandidateJob(
        model=ModelSource(
            kind="candidate", problem_path=str(PROBLEM), candidate_path=str(candidate)
        ),
        device="cpu",
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(inputs),
        out_dir=str(tmp_path / "outputs"),
    )
    workdir = tmp_path / "work"
    run_job(job, workdir, timeout_s=120, device="cpu", via=zygote if launch == "forked" else None)
    report = json.loads((workdir / "report.json").read_text())
    assert report["rc"] == 0, report["stderr"]
