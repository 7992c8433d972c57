"""The LLM search end to end on the GPU: scripted replies over real HTTP, real GPU work.

    source scripts/device_env.sh; python3 -m pytest -m gpu tests/e2e/test_gpu_llm_campaigns.py

Runs ``tests/e2e/llm_campaign.py`` (its docstring has the scenarios) on one problem in a
child process, so its embedded server, workers and scripted LLM server are its own,
and checks that every decision was the one its reply was written for.  Four problems
take two device calls: run the module itself with ``--keep-workers`` / ``--resume``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.gpu

PROBLEM = ROOT / "problems" / "level1" / "001_relu_chain.py"
DEADLINE_S = 480


def test_each_scripted_reply_gets_the_verdict_it_was_written_for(gpu_out: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.e2e.llm_campaign",
            "--deadline",
            str(DEADLINE_S),
            "--problems",
            str(PROBLEM),
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S + 60,
        env={**os.environ, "OUT": str(gpu_out / "llm")},
        cwd=ROOT,
    )
    (gpu_out / "llm_campaign.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    met = re.findall(r"expectations met (\d+)/(\d+)", run.stdout)
    assert met, run.stdout[-3000:]
    assert all(int(done) == int(total) > 0 for done, total in met), met
    assert "MISMATCH" not in run.stdout
