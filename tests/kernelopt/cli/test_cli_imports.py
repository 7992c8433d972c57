"""Every ``kernelopt`` command starts a Python process: what the CLI imports up front
is paid by ``list``, ``show`` and ``pending`` alike."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT

HEAVY = ("torch", "triton", "openai")  # imported by the commands that need them, inside them


def test_the_cli_starts_without_the_heavy_packages() -> None:
    probe = (
        f"import sys, kernelopt.cli.app; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [], f"imported at start: {out.stdout}"
