"""The worker's shared zygote, started again after it died, lives on for later jobs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from gates.runner import run_job
from gates.zygote_service import DEVICE_ENV, SOCKET_ENV, ZygoteService
from tests.gates.test_isolation_primitives import _job


def test_a_zygote_started_again_inside_a_request_outlives_that_request(
    tmp_path: Path, gates_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests are served on short-lived threads, and the sandbox ties a zygote to the
    thread that started it (``--die-with-parent``): one started again there was gone when
    the request ended, so every later job paid for a new one."""
    service = ZygoteService("cpu", str(tmp_path / "z.sock"))
    service.start(probe=False)
    monkeypatch.setenv(SOCKET_ENV, service.path)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    try:
        torch.save([torch.randn(8, 64)], tmp_path / "seed0.pt")
        first = service._zygote
        assert first is not None
        first.close()  # the zygote dies; the next job starts another
        outcome = run_job(
            _job(tmp_path, "swish_fused.py"), tmp_path / "a", timeout_s=60, device="cpu"
        )
        assert outcome.ok, outcome.describe()
        second = service._zygote
        assert second is not None and second is not first
        time.sleep(1.0)  # the request's thread has ended
        assert second.alive
        outcome = run_job(
            _job(tmp_path, "swish_fused.py"), tmp_path / "b", timeout_s=60, device="cpu"
        )
        assert outcome.ok and service._zygote is second
    finally:
        service.close()
