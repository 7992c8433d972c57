"""Workers the embedded default runs by itself, so one command does the whole job.

With no ``KERNELOPT_TEMPORAL_ADDRESS`` configured, ``kernelopt optimize`` starts
the dev server, one CPU worker and one GPU worker per visible GPU as detached
background processes (pid files and logs under ``$KERNELOPT_HOME/workers``).
They outlive the command, so Ctrl-C only detaches the display and the
campaign keeps running; ``kernelopt server stop`` stops them with the server.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kernelopt.code_version import code_fingerprint
from kernelopt.config import Settings
from kernelopt.gpu_info import gpu_names
from kernelopt.log import get_logger
from kernelopt.pidfile import process_alive, read_live_pid, write_pid_file
from kernelopt.store import private_dir

log = get_logger(__name__)

# names the pipe a new worker writes one byte to once it runs worker.py (read there by
# ``_tell_starter``, before its heavy imports)
STARTED_FD_ENV = "KERNELOPT_WORKER_STARTED_FD"


@dataclass(frozen=True)
class LocalWorker:
    name: str  # "cpu" or "gpu0", "gpu1", ...
    args: list[str]


def planned_workers(gpus: list[str] | None = None) -> list[LocalWorker]:
    gpus = gpu_names() if gpus is None else gpus
    workers = [LocalWorker("cpu", ["--queue", "cpu"])]
    workers += [
        LocalWorker(f"gpu{i}", ["--queue", "gpu", "--gpu", str(i)]) for i in range(len(gpus))
    ]
    return workers


def _dir(settings: Settings) -> Path:
    return private_dir(settings.home / "workers")


def _worker_named(name: str) -> LocalWorker | None:
    if name == "cpu":
        return LocalWorker("cpu", ["--queue", "cpu"])
    if name.startswith("gpu") and name[3:].isdigit():
        return LocalWorker(name, ["--queue", "gpu", "--gpu", name[3:]])
    return None


def is_worker(name: str, argv: list[str]) -> bool:
    """``argv`` is exactly the command we start for worker ``name``: a pid file naming any
    other process is refused, so stopping workers never signals a stranger."""
    worker = _worker_named(name)
    return worker is not None and argv == _command(worker)


def running(settings: Settings) -> dict[str, int]:
    """name -> pid of the local workers that are alive."""
    out: dict[str, int] = {}
    for pid_file in _dir(settings).glob("*.pid"):
        name = pid_file.stem
        pid = read_live_pid(pid_file, expect=lambda argv, name=name: is_worker(name, argv))
        if pid is not None:
            out[pid_file.stem] = pid
        else:
            pid_file.unlink(missing_ok=True)
    return out


def _command(worker: LocalWorker) -> list[str]:
    return [sys.executable, "-m", "worker", *worker.args]


def ensure_local_workers(settings: Settings, gpus: list[str] | None = None) -> dict[str, int]:
    """Start the planned workers that are not already running; idempotent.

    A worker started from other code than is installed now (``git pull``,
    an upgrade) is stopped gracefully and started again: its running
    activities are cancelled and retried by the new one.
    """
    alive = running(settings)
    directory = _dir(settings)
    env = {**os.environ, "KERNELOPT_HOME": str(settings.home)}
    code = code_fingerprint()
    stale = {
        name: pid
        for name, pid in alive.items()
        if _read(directory / f"{name}.code") not in (code, None)
    }
    if stale:
        log.info("restarting local workers: the code changed", workers=sorted(stale))
        _stop(settings, stale, wait_s=40.0)
        alive = {k: v for k, v in alive.items() if k not in stale}
    for worker in planned_workers(gpus):
        if worker.name in alive:
            continue
        log_path = directory / f"{worker.name}.log"
        log_file = log_path.open("ab")
        os.chmod(log_path, 0o600)
        started_r, started_w = os.pipe()
        try:
            proc = subprocess.Popen(
                _command(worker),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**env, STARTED_FD_ENV: str(started_w)},
                pass_fds=(started_w,),
                cwd=str(Path(__file__).resolve().parent.parent),
            )
        finally:
            os.close(started_w)  # the worker holds the only write end now
            log_file.close()
        write_pid_file(directory / f"{worker.name}.pid", proc.pid)
        (directory / f"{worker.name}.code").write_text(code)
        if not _await_started(started_r):
            log.warning("local worker did not report its start", worker=worker.name)
        alive[worker.name] = proc.pid
        log.info("local worker started", worker=worker.name, pid=proc.pid)
    return alive


def _await_started(started_r: int, limit_s: float = 10.0) -> bool:
    """Wait for the new worker's byte on its pipe; False if it exited first or ``limit_s`` passed.

    ``Popen`` returns as soon as the child execs, but ``/proc/PID/cmdline`` may still be
    empty then (the kernel releases the parent before it fills in the new argv):
    ``running`` did not know the worker yet, and a second ``ensure_local_workers`` right
    after the first started another beside it.  A worker that writes its byte runs
    worker.py, so its argv is its own.
    """
    try:
        poller = select.poll()  # not select(): a process with many files has fds past 1024
        poller.register(started_r, select.POLLIN)
        if not poller.poll(limit_s * 1000):
            return False
        return os.read(started_r, 1) == b"1"  # b"": it exited without writing
    finally:
        os.close(started_r)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def stop_local_workers(settings: Settings, wait_s: float = 40.0) -> list[str]:
    """SIGTERM every local worker (graceful shutdown), SIGKILL stragglers."""
    return _stop(settings, running(settings), wait_s)


def _stop(settings: Settings, alive: dict[str, int], wait_s: float) -> list[str]:
    for pid in alive.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(process_alive(p) for p in alive.values()):
        time.sleep(0.2)
    for pid in alive.values():
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    for name in alive:
        (_dir(settings) / f"{name}.pid").unlink(missing_ok=True)
        (_dir(settings) / f"{name}.code").unlink(missing_ok=True)
    return sorted(alive)
