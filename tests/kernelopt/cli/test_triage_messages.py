"""``kernelopt triage`` without a GPU: one line, no child traceback (issue 26, point 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelopt.cli import triage as cli_triage
from tests.support.cli import run_cli
from tests.support.paths import ROOT
from tests.support.temporal import env_for, make_settings

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"


def test_triage_without_a_gpu_says_so_in_one_line(tmp_path: Path) -> None:
    env = {
        **env_for(make_settings(tmp_path / "home")),
        "CUDA_VISIBLE_DEVICES": "",
        "COLUMNS": "200",
    }
    done = run_cli(["triage", str(PROBLEM)], env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], done.stderr


def test_triage_refuses_inputs_whose_shape_follows_the_seed_before_anything_else(
    tmp_path: Path,
) -> None:
    """Triage compiles the forward for one shape, as a campaign does: said first, in one line."""
    path = tmp_path / "varying.py"
    path.write_text(
        "import random\nimport torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n\n\n"
        "def get_inputs():\n    return [torch.randn(random.randint(2, 60))]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    env = {
        **env_for(make_settings(tmp_path / "home")),
        "CUDA_VISIBLE_DEVICES": "",
        "COLUMNS": "200",
    }
    done = run_cli(["triage", str(path)], env)
    assert done.returncode == 2
    assert "other inputs under other seeds" in done.stderr and "no CUDA GPU" not in done.stderr


def test_a_child_failure_is_one_line_without_a_doubled_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Past the up-front check (say nvidia-smi lists a GPU CUDA cannot use): the child's error."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(cli_triage, "_has_gpu", lambda: True)
    assert cli_triage.triage_command(PROBLEM, False, "auto") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "NoGpuError: this step needs a CUDA GPU" in err, err
    assert "NoGpuError: NoGpuError" not in err and "Traceback" not in err, err
