"""The embedded dev server: idempotent start, clear one-line errors."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from kernelopt import temporal_server
from kernelopt.temporal_server import EmbeddedServer, ServerError
from tests.support.temporal import make_settings


def test_start_is_idempotent_and_status_reports_ui(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    server = EmbeddedServer(settings)
    try:
        first = server.start()
        second = server.start()
        assert first.running and second.running
        assert first.pid == second.pid
        assert str(settings.ui_port) in first.ui_url
        assert "running" in server.status().describe()
    finally:
        assert server.stop()
    assert not server.status().running
    assert not server.stop()


def test_port_held_by_someone_else_is_a_clear_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", settings.server_port))
        squatter.listen()
        with pytest.raises(ServerError, match=f"port {settings.server_port} is held"):
            EmbeddedServer(settings).start()


def test_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    settings.server_dir.mkdir(parents=True)
    (settings.server_dir / "temporal.db").write_bytes(b"this is not sqlite at all")
    with pytest.raises(ServerError, match="corrupt"):
        EmbeddedServer(settings).start()


def test_unwritable_state_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    settings = make_settings(blocker / "home")
    with pytest.raises(ServerError, match="not writable"):
        EmbeddedServer(settings).start()


@pytest.mark.parametrize("which", ["server_port", "ui_port"])
def test_a_port_taken_after_the_check_is_an_error_not_a_stranger_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """Another process binds our port between the check and our server's bind (the race
    of two starts at once): start fails naming that port, instead of reporting ready on
    the stranger's open port (clients then met "Namespace kernelopt is not found")."""
    settings = make_settings(tmp_path)
    port = getattr(settings, which)
    real_popen = subprocess.Popen
    squatter = socket.socket()

    def popen_after_squatter(cmd, *args, **kwargs):
        if cmd[1:3] == ["server", "start-dev"]:
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
        return real_popen(cmd, *args, **kwargs)

    monkeypatch.setattr(temporal_server.subprocess, "Popen", popen_after_squatter)
    started = time.monotonic()
    with squatter, pytest.raises(ServerError, match=f"port {port} is held"):
        EmbeddedServer(settings).start(wait_s=30)
    assert time.monotonic() - started < 10  # told at once, not after the readiness wait


def test_an_internal_port_lost_to_another_process_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dev server picks its other ports itself; one taken meanwhile costs a new start."""
    settings = make_settings(tmp_path)
    real_popen = subprocess.Popen
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    calls: list[list[str]] = []

    def popen(cmd, *args, **kwargs):
        if cmd[1:3] == ["server", "start-dev"] and not calls:
            cmd = [*cmd, "--http-port", str(squatter.getsockname()[1])]  # as if it drew this one
        if cmd[1:3] == ["server", "start-dev"]:
            calls.append(cmd)
        return real_popen(cmd, *args, **kwargs)

    monkeypatch.setattr(temporal_server.subprocess, "Popen", popen)
    server = EmbeddedServer(settings)
    with squatter:
        try:
            assert server.start().running
        finally:
            server.stop()
    assert len(calls) == 2


def test_an_old_failure_in_the_log_is_not_this_starts_reason(tmp_path: Path) -> None:
    """A moved home brings its server log: an old "address already in use" in it is history."""
    settings = make_settings(tmp_path)
    settings.server_dir.mkdir(parents=True)
    server = EmbeddedServer(settings)
    server.log_path.write_text(
        "Error: can't set UI port 1234: listen tcp 127.0.0.1:1234: bind: address already in use\n"
    )
    offset = server.log_path.stat().st_size
    with server.log_path.open("a") as log:
        log.write("Error: unable to start server: boom\n")
    reason, port = server._failure_reason(offset)
    assert port is None and "boom" in reason
