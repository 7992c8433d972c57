"""Local workers started from older code are replaced; current ones are left alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelopt import local_workers
from kernelopt.config import Settings
from kernelopt.pidfile import process_alive


@pytest.fixture
def sleeper_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    """Workers that only sleep: the restart logic, not Temporal, is under test."""
    monkeypatch.setattr(
        local_workers, "_command", lambda w: [sys.executable, "-c", "import time; time.sleep(120)"]
    )
    return Settings(home=tmp_path)


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
