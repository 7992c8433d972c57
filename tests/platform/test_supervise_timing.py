"""GPU-second budgets charge what the activity wrapper measured, not what the child says."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.supervise import run_supervised
from tests.platform.timed_probe import NapIn, NapOut

ROOT = Path(__file__).resolve().parents[2]


async def test_the_wrapper_sets_device_seconds_over_the_childs_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    out = await run_supervised(
        "tests.platform.timed_probe:nap", NapIn(seconds=0.6), NapOut, env={"PYTHONPATH": str(ROOT)}
    )
    assert out.napped == 0.6
    assert out.device_seconds is not None and out.device_seconds >= 0.6
