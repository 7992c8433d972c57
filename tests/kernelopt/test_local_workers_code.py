"""Local workers started from older code are replaced; current ones are left alone."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kernelopt import local_workers
from kernelopt.config import Settings
from kernelopt.pidfile import process_alive


@pytest.fixture
def sleeper_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    """Workers that only sleep: the restart logic, not Temporal, is under test."""
    monkeypatch.setattr(local_workers, "_command", lambda w: [sys.executable, "-c", SLEEPER])
    return Settings(home=tmp_path)


# tells its starter it runs, as worker.py does, then sleeps
SLEEPER = (
    "import os, time; os.write(int(os.environ['KERNELOPT_WORKER_STARTED_FD']), b'1'); "
    "time.sleep(120)"
)


def test_a_worker_from_older_code_is_restarted(
    sleeper_workers: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = sleeper_workers
    monkeypatch.setattr(local_workers, "code_fingerprint", lambda: "old")
    first = local_workers.ensure_local_workers(settings, gpus=[])
    try:
        assert local_workers.ensure_local_workers(settings, gpus=[]) == first
        monkeypatch.setattr(local_workers, "code_fingerprint", lambda: "new")
        second = local_workers.ensure_local_workers(settings, gpus=[])
        assert second["cpu"] != first["cpu"]
        assert not process_alive(first["cpu"])
        assert (settings.home / "workers" / "cpu.code").read_text() == "new"
    finally:
        local_workers.stop_local_workers(settings, wait_s=5)
    assert not (settings.home / "workers" / "cpu.code").exists()


def test_the_fingerprint_follows_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelopt import code_version

    for pkg in ("kernelopt", "workflows", "activities", "gates"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "a.py").write_text("x = 1\n")
    (tmp_path / "worker.py").write_text("")
    monkeypatch.setattr(code_version, "_ROOT", tmp_path)
    before = code_version.code_fingerprint()
    assert code_version.code_fingerprint() == before
    (tmp_path / "workflows" / "a.py").write_text("x = 2\n")
    assert code_version.code_fingerprint() != before


def test_a_started_worker_is_running_when_the_start_returns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ensure_local_workers returns once the worker said it runs, not once its argv shows:
    a second call right after finds it instead of starting another."""
    marker = tmp_path / "started"
    slow = (
        f"import os, pathlib, time; time.sleep(0.5); pathlib.Path({str(marker)!r}).touch(); "
        "os.write(int(os.environ['KERNELOPT_WORKER_STARTED_FD']), b'1'); time.sleep(120)"
    )
    monkeypatch.setattr(local_workers, "_command", lambda w: [sys.executable, "-c", slow])
    settings = Settings(home=tmp_path / "home")
    try:
        first = local_workers.ensure_local_workers(settings, gpus=[])
        assert marker.exists()
        assert local_workers.ensure_local_workers(settings, gpus=[]) == first
    finally:
        local_workers.stop_local_workers(settings, wait_s=5)


def test_a_worker_that_dies_at_start_does_not_hold_the_starter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_workers, "_command", lambda w: [sys.executable, "-c", "exit(3)"])
    started = time.monotonic()
    local_workers.ensure_local_workers(Settings(home=tmp_path), gpus=[])
    assert time.monotonic() - started < 5


def test_worker_py_tells_its_starter_before_its_imports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real worker command writes the byte (it then fails: no server at that address)."""
    told: list[bool] = []
    real = local_workers._await_started

    def spy(started_r: int, limit_s: float = 10.0) -> bool:
        told.append(real(started_r, limit_s))
        return told[-1]

    monkeypatch.setattr(local_workers, "_await_started", spy)
    monkeypatch.setenv("KERNELOPT_TEMPORAL_ADDRESS", "127.0.0.1:9")  # discard: nothing answers
    settings = Settings(home=tmp_path)
    try:
        local_workers.ensure_local_workers(settings, gpus=[])
    finally:
        local_workers.stop_local_workers(settings, wait_s=5)
    assert told == [True]
