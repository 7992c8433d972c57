"""Worker processes for end-to-end tests: real OS processes a test can SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Self

from kernelopt.config import Settings
from tests.support.paths import ROOT
from tests.support.temporal import env_for


def live_parents() -> dict[int, int]:
    """Every live (non-zombie) host process and its parent, from /proc: a snapshot of the
    process tree that the sandbox tests compare before and after an attack."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # the command name (field 2) may contain spaces: split after its ")"
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    return parents


def descendants(parents: dict[int, int], roots: set[int]) -> set[int]:
    """The processes below ``roots`` in the ``parents`` snapshot (the roots not included)."""
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class WorkerProcess:
    """``python -m MODULE KIND QUEUE`` as a process group of its own, stdin closed and output
    to a log file (never a pipe nobody reads: a full one would block the worker), so a test
    can SIGKILL it, SIGSTOP it or let it run for minutes.

    ``log_dir``: where the log goes (default: ``test-worker-logs`` in the settings' home);
    ``module``: the worker entry point, which prints a line ``ready`` once it polls its queue.
    """

    module = "tests.support.run_worker"

    def __init__(
        self, settings: Settings, kind: str, queue: str, log_dir: Path | None = None, **env: str
    ) -> None:
        self.kind, self.queue = kind, queue
        logs = log_dir or settings.home / "test-worker-logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log_path = logs / f"{kind}-{queue}-{uuid.uuid4().hex[:8]}.log"
        with self.log_path.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, kind, queue],
                cwd=ROOT,
                env={**env_for(settings), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> Self:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "ready" in self.output().splitlines():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} worker did not start:\n{self.output()[-3000:]}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL of the whole process group: a preempted machine, no goodbye."""
        if self.alive:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (after a SIGCONT, should a test have SIGSTOPped it); SIGKILL after 40 s."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.kill()


def start_workers(settings: Settings, cpu_queue: str, gpu_queue: str, **env: str):
    cpu = WorkerProcess(settings, "cpu", cpu_queue, **env)
    gpu = WorkerProcess(settings, "gpu", gpu_queue, **env)
    return cpu.wait_ready(), gpu.wait_ready()
