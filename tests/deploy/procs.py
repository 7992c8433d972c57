"""Worker processes for the deployment tests: spawn, wait for a log line, stop, kill.

Each worker is a separate OS process (its own interpreter, its own Temporal
client) with its output in a file, so a test reads exactly what an operator
would see in ``docker logs`` / ``kubectl logs``.  Optionally a process runs in
its own Linux network namespace (``ip netns exec``), i.e. as a separate host
that reaches the Temporal frontend over a veth link.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.paths import ROOT


@dataclass
class WorkerProc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        """Block until ``needle`` appears in the output; fail with the output's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if not self.alive():
                break
            time.sleep(0.1)
        raise AssertionError(
            f"{self.name} (rc={self.popen.poll()}) never logged {needle!r}; "
            f"output tail:\n{self.text()[-3000:]}"
        )

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (what docker stop / kubelet send) and wait for the exit code."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} ignored SIGTERM for {timeout:.0f} s") from None

    def kill(self) -> None:
        """SIGKILL: the host vanishes (OOM kill, node loss, preemption)."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)


def python_env(base: dict[str, str], **extra: str) -> dict[str, str]:
    env = dict(base)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def spawn(
    name: str,
    args: list[str],
    env: dict[str, str],
    log_dir: Path,
    netns: str | None = None,
) -> WorkerProc:
    """Start ``python <args>`` from the repository root, output to ``log_dir/name.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    cmd = [sys.executable, *args]
    if netns is not None:
        # `ip netns exec` execs the command after setns: the pid is python's own.
        cmd = ["ip", "netns", "exec", netns, *cmd]
    with log_path.open("wb") as out:
        popen = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(ROOT),
        )
    return WorkerProc(name, popen, log_path)
