"""The control plane: pid files by identity, a self-repairing store, owner-only state."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelopt.config import Settings
from kernelopt.local_workers import running, stop_local_workers
from kernelopt.pidfile import process_alive, process_identity, read_live_pid, write_pid_file
from kernelopt.store import ArtifactError, open_store
from kernelopt.temporal_server import EmbeddedServer


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen]:
    """A process kernelopt did not start (stands for any victim of a planted pid file)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    # Popen returns once exec has begun; on a loaded CPU /proc may show no argv for a moment
    deadline = time.monotonic() + 10.0
    while (process_identity(proc.pid) or (0, []))[1][:1] != ["sleep"]:
        assert time.monotonic() < deadline, "the stranger never showed its argv"
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_pid_files_name_a_process_by_identity(tmp_path: Path, stranger: subprocess.Popen) -> None:
    path = tmp_path / "x.pid"
    write_pid_file(path, stranger.pid)
    assert _mode(path) == 0o600
    is_sleep = lambda argv: argv[:1] == ["sleep"]  # noqa: E731
    assert read_live_pid(path, expect=is_sleep) == stranger.pid
    assert read_live_pid(path, expect=lambda argv: False) is None  # not a command we start
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "start": record["start"] + 1}))  # pid reused
    assert read_live_pid(path, expect=is_sleep) is None
    path.write_text(str(stranger.pid))  # a bare pid: legacy or planted, never trusted
    assert read_live_pid(path) is None


def test_server_stop_and_worker_stop_never_kill_a_planted_pid(
    tmp_path: Path, stranger: subprocess.Popen
) -> None:
    settings = Settings(home=tmp_path / "home")
    workers = tmp_path / "home" / "workers"
    workers.mkdir(parents=True)
    server_dir = settings.server_dir
    server_dir.mkdir(parents=True)
    start, argv = process_identity(stranger.pid) or (0, [])
    forged = json.dumps({"pid": stranger.pid, "start": start, "argv": argv})  # exact identity
    (workers / "cpu.pid").write_text(forged)
    (workers / "gpu0.pid").write_text(str(stranger.pid))
    (server_dir / "server.pid").write_text(forged)
    assert running(settings) == {}
    assert stop_local_workers(settings, wait_s=1.0) == []
    assert EmbeddedServer(settings).stop(wait_s=1.0) is False
    time.sleep(0.2)
    assert process_alive(stranger.pid)
    assert _mode(workers) == 0o700


def test_a_corrupt_blob_is_repaired_by_writing_the_same_content(tmp_path: Path) -> None:
    store = open_store(tmp_path / "artifacts")
    ref = store.put_bytes(b"kernel source v1")
    blob = tmp_path / "artifacts" / ref.sha256[:2] / ref.sha256
    blob.write_bytes(b"poisoned")
    with pytest.raises(ArtifactError, match="corrupt"):
        store.get_bytes(ref)
    again = store.put_bytes(b"kernel source v1")
    assert again.sha256 == ref.sha256
    assert store.get_bytes(ref) == b"kernel source v1"


def test_artifacts_are_owner_only_unless_group_mode_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELOPT_SHARED_GROUP", raising=False)
    store = open_store(tmp_path / "private" / "artifacts")
    ref = store.put_bytes(b"weights")
    blob = tmp_path / "private" / "artifacts" / ref.sha256[:2] / ref.sha256
    assert _mode(blob) == 0o600
    assert _mode(blob.parent) == 0o700 and _mode(blob.parent.parent) == 0o700
    assert _mode(store.materialize(ref, tmp_path / "m", "w.bin")) == 0o600
    monkeypatch.setenv("KERNELOPT_SHARED_GROUP", "1")
    shared = open_store(tmp_path / "shared")
    ref = shared.put_bytes(b"weights")
    blob = tmp_path / "shared" / ref.sha256[:2] / ref.sha256
    assert _mode(blob) == 0o640
    assert _mode(blob.parent) == 0o2770
