"""Stopped means stopped, and Ctrl-C works however the CLI was launched (issue 26, points 2, 5)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from kernelopt.temporal_server import EmbeddedServer
from tests.support.cli import run_cli, start_optimize_without_gpu
from tests.support.temporal import env_for, make_settings


@pytest.mark.parametrize(
    "args", [["list"], ["show", "some-id"], ["cancel", "some-id"], ["audit", "some-id"]]
)
def test_read_only_commands_say_the_server_is_stopped_and_start_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    settings = make_settings(tmp_path / "home")
    done = run_cli(args, env_for(settings))
    assert done.returncode == 2, done.stderr
    text = " ".join(done.stderr.split())
    assert "server is stopped" in text and "kernelopt server start" in text, text
    assert "Traceback" not in text
    assert not EmbeddedServer(settings).status().running
    assert not (settings.server_dir / "server.pid").exists()


def _ignore_sigint() -> None:
    """preexec_fn: what a background job in a non-interactive shell hands its children."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_during_start_up_exits_130_with_a_message_even_if_sigint_was_ignored(
    tmp_path: Path,
) -> None:
    _, env, proc = start_optimize_without_gpu(
        tmp_path, stdout=subprocess.PIPE, preexec_fn=_ignore_sigint
    )
    try:
        first = proc.stderr.readline()  # printed just before the server is started
        assert "starting the Temporal dev server" in first, first
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=90)
        text = " ".join((first + rest).split())
        assert proc.returncode == 130, text
        assert "interrupted" in text and "Traceback" not in text, text
        # whatever was said, nothing ran on: either nothing was submitted, or the one
        # submitted campaign is named so it can be cancelled
        assert "before anything was submitted" in text or "was submitted" in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and run_cli(["server", "stop"], env).returncode:
            time.sleep(0.5)
