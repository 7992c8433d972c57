"""The command line as a user meets it: clear errors before any workflow, honest waiting."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli, start_optimize_without_gpu
from tests.support.temporal import env_for, make_settings


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        ("def broken(:\n", "syntax"),
        (
            "import torch\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n",
            "Model",
        ),
        (
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x\ndef get_init_inputs():\n    return []\n",
            "get_inputs",
        ),
    ],
)
def test_bad_problem_files_are_rejected_before_any_workflow(
    tmp_path: Path, content: str | None, reason: str
) -> None:
    settings = make_settings(tmp_path / "home")
    problem = tmp_path / "problem.py"
    if content is not None:
        problem.write_text(content)
    done = run_cli(["optimize", str(problem), "--no-follow"], env_for(settings))
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert str(problem) in message and reason.lower() in message.lower(), message
    # rejected before any server, worker or workflow was started
    assert not (settings.server_dir / "server.pid").exists()


@pytest.mark.parametrize("command", ["cancel", "show", "audit", "budget"])
def test_empty_campaign_id_is_refused_before_any_server(tmp_path: Path, command: str) -> None:
    """`kernelopt cancel "$ID"` with an unset variable: say so, start nothing."""
    settings = make_settings(tmp_path / "home")
    done = run_cli([command, " "], env_for(settings))
    assert done.returncode == 2
    assert "empty campaign id" in done.stderr and "kernelopt list" in done.stderr
    assert not (settings.server_dir / "server.pid").exists()


def test_unknown_campaign_id_points_to_the_listing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    env = env_for(settings)
    try:
        assert run_cli(["server", "start"], env).returncode == 0
        done = run_cli(["cancel", "no-such-campaign"], env)
        assert done.returncode == 2
        text = " ".join(done.stderr.split())
        assert "not found" in text and "no-such-campaign" in text, text
        assert "`kernelopt list` shows the campaigns" in text, text
    finally:
        run_cli(["server", "stop"], env)


def sigint_as_a_terminal_gives_it() -> None:
    """preexec_fn: SIGINT at its default and unblocked, however pytest itself was launched.

    A background job (``pytest &``) or ``nohup`` hands its children SIGINT ignored; a
    terminal's Ctrl-C reaches a foreground CLI with the default disposition.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


MIN_AGE_S = 5.0  # the campaign's age when `show` is asked: far from the 0 s of a wrong clock


class StderrReader:
    """A child's stderr read as it comes, so a test can wait for what it says."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._chunks: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self._thread.start()
        self._proc = proc

    def _pump(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self._chunks.append(line)

    def text(self) -> str:
        """Everything so far, whitespace folded (rich wraps long lines at 80 columns)."""
        if self._proc.poll() is not None:
            self._thread.join(10)
        return " ".join("".join(self._chunks).split())

    def wait_for(self, phrase: str, timeout: float) -> float:
        """Block until ``phrase`` has been printed; returns when it was first seen."""
        deadline = time.monotonic() + timeout
        while phrase not in self.text():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise AssertionError(f"never said {phrase!r}: {self.text()}")
            time.sleep(0.1)
        return time.monotonic()


def test_optimize_without_gpu_says_it_waits_and_ctrl_c_detaches(tmp_path: Path) -> None:
    settings, env, proc = start_optimize_without_gpu(
        tmp_path, stdout=subprocess.DEVNULL, preexec_fn=sigint_as_a_terminal_gives_it
    )
    err = StderrReader(proc)
    try:
        # Ctrl-C once it says it waits (not after a fixed sleep)
        submitted_at = err.wait_for("submitted", 90)
        err.wait_for("waiting for a GPU worker", 60)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        text = err.text()
        assert "waiting for a GPU worker" in text and "kernelopt worker --queue gpu" in text, text
        assert "detached" in text
        # said once what it started in the background, where the logs are, and the UI
        assert text.count("started in the background") == 1, text
        assert f"Temporal UI: http://127.0.0.1:{settings.ui_port}" in text, text
        assert str(settings.server_dir / "server.log") in text, text
        assert "workers cpu" in text and str(settings.home / "workers") in text, text
        listing = run_cli(["list"], {**env, "COLUMNS": "80"})
        assert "running" in listing.stdout  # Ctrl-C did not cancel the campaign
        assert "…" not in listing.stdout, listing.stdout  # nothing cut at 80 columns
        campaign = re.search(r"campaign (\S+) submitted", text)
        assert campaign, text
        assert campaign.group(1) in listing.stdout  # whole, to copy into show/cancel
        # show: the campaign's real age (at least the time since it said "submitted"),
        # and that it waits for a GPU worker
        time.sleep(max(0.0, MIN_AGE_S - (time.monotonic() - submitted_at)))
        at_least = time.monotonic() - submitted_at
        show = run_cli(["show", campaign.group(1)], {**env, "COLUMNS": "80"})
        shown = " ".join(show.stdout.split())
        elapsed = re.search(r"elapsed (\d+) s", shown)
        assert elapsed and int(elapsed.group(1)) >= int(at_least), (at_least, shown)
        assert "waiting for a GPU worker" in shown, shown
        audit = run_cli(["audit", campaign.group(1)], {**env, "COLUMNS": "80"})
        audited = " ".join(audit.stdout.split())
        assert "waiting for a GPU worker" in audited, audited
        assert "scheduled" not in audited, audited  # waiting is not an incident
        # cancelled while compile waits for a GPU worker: it ends now, with no baseline
        cancel = run_cli(["cancel", campaign.group(1)], env)
        assert "without a baseline" in " ".join(cancel.stdout.split()), cancel.stdout
        for _ in range(60):
            again = run_cli(["cancel", campaign.group(1)], env)
            if again.returncode:
                break
            time.sleep(1.0)
        assert "already completed" in again.stderr and "kernelopt show" in again.stderr
        # a cancelled campaign reads as cancelled everywhere, not as a 1.000x fallback
        show = run_cli(["show", campaign.group(1)], {**env, "COLUMNS": "80"})
        assert "cancelled" in show.stdout and "fallback" not in show.stdout, show.stdout
        assert "artifact " not in show.stdout, show.stdout  # the report is a path
        wide = run_cli(["show", campaign.group(1)], {**env, "COLUMNS": "300"})
        report = re.search(r"report\s*│\s*(\S+\.md)", wide.stdout)
        assert report and Path(report.group(1)).is_file(), wide.stdout
        listing = run_cli(["list"], {**env, "COLUMNS": "80"})
        assert "cancelled" in listing.stdout, listing.stdout
        audit = run_cli(["audit", campaign.group(1)], {**env, "COLUMNS": "80"})
        assert "cancelled" in audit.stdout and "fallback" not in audit.stdout, audit.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        run_cli(["server", "stop"], env)


def test_gpu_worker_refuses_without_cuda(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "home")
    env = {**env_for(settings), "CUDA_VISIBLE_DEVICES": "", "PATH": os.defpath}
    done = run_cli(["worker", "--queue", "gpu"], env)
    assert done.returncode == 2
    assert "no CUDA GPU" in done.stderr
