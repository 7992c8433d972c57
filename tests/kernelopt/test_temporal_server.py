"""The embedded dev server: idempotent start, clear one-line errors."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

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
