"""The embedded server, the local workers and any extra worker of one call, and what a cut call left running."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from temporalio.client import Client

from kernelopt.config import Settings
from kernelopt.errors import KernelOptError
from kernelopt.store import write_atomic
from scripts.llm_eval.stream import Stream

ROOT = Path(__file__).resolve().parents[2]
READY_S = 240.0  # workers must poll within this (a GPU worker's zygote takes ~20 s)
# one file per running call (its pid): the home whose server and workers it started
LIVE_DIR = Path(tempfile.gettempdir()) / "llm-eval-live"


def stop_leftovers(stream: Stream) -> None:
    """Stop the server and workers of calls whose harness process is gone.

    They run in sessions of their own, so a call killed at its time limit leaves
    them running on a machine that stays warm ~30 s; the next call there would
    share the GPU with them.  A call still running (its pid alive) is left alone;
    the local workers and the server are found by their pid files (which check the
    command line), an extra worker by its recorded pid and command line.
    """
    from kernelopt.local_workers import stop_local_workers
    from kernelopt.pidfile import process_alive
    from kernelopt.temporal_server import EmbeddedServer

    for path in sorted(LIVE_DIR.glob("*.json")) if LIVE_DIR.is_dir() else []:
        try:
            pid, live = int(path.stem), json.loads(path.read_text())
            home = Path(live["home"])
        except (OSError, ValueError, KeyError):
            continue
        if process_alive(pid):
            continue
        extra = [_stop_extra(p, argv) for p, argv in live.get("extra", [])]
        old = Settings(home=home)
        workers = stop_local_workers(old, wait_s=10)
        server = EmbeddedServer(old).stop()
        path.unlink(missing_ok=True)
        stream.event(
            "leftovers_stopped", home=str(home), workers=workers, extra=extra, server=server
        )


def _stop_extra(pid: int, argv: list[str]) -> bool:
    """SIGTERM (then SIGKILL) the process group of ``pid`` if it still runs ``argv``."""
    from kernelopt.pidfile import process_alive

    try:
        running = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    if [a.decode(errors="replace") for a in running] != argv:
        return False  # another process has that pid now
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if process_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return True


def mark_live(settings: Settings, extra: list[subprocess.Popen] = ()) -> Path:
    """This call's home (and extra workers) while it runs: ``stop_leftovers`` reads it."""
    LIVE_DIR.mkdir(parents=True, exist_ok=True)
    path = LIVE_DIR / f"{os.getpid()}.json"
    data = {"home": str(settings.home), "extra": [[p.pid, list(p.args)] for p in extra]}
    write_atomic(path, json.dumps(data).encode())
    return path


# --- server and workers -----------------------------------------------------------------------
class Site:
    """The embedded server, the local workers and any extra worker command, on one home."""

    def __init__(self, settings: Settings, extra: list[str], stream: Stream) -> None:
        self.settings = settings
        self.extra = extra
        self.stream = stream
        self.extra_procs: list[subprocess.Popen] = []
        self.local: dict[str, int] = {}
        self.client: Client | None = None
        self.live: Path | None = None

    async def up(self, gpu_queue: str) -> Client:
        from kernelopt.client import connect
        from kernelopt.follow import has_pollers
        from kernelopt.local_workers import ensure_local_workers, running
        from kernelopt.temporal_server import EmbeddedServer

        self.live = mark_live(self.settings)
        status = await asyncio.to_thread(EmbeddedServer(self.settings).start)
        self.stream.event("server_started", address=status.address, pid=status.pid)
        self.client = await connect(self.settings, start_embedded=False)
        self.local = await asyncio.to_thread(ensure_local_workers, self.settings)
        logs = self.settings.home / "workers"
        for i, command in enumerate(self.extra):
            argv = shlex.split(
                command.format(gpu_queue=gpu_queue, cpu_queue=self.settings.cpu_queue)
            )
            with (logs / f"extra{i}.log").open("ab") as log:
                self.extra_procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
        mark_live(self.settings, self.extra_procs)
        self.stream.event(
            "workers_started",
            local=sorted(self.local),
            extra=[p.pid for p in self.extra_procs],
        )
        wanted = [(self.settings.cpu_queue, False), (self.settings.cpu_queue, True)]
        if any(n.startswith("gpu") for n in self.local) or self.extra_procs:
            wanted.append((gpu_queue, True))
        deadline = time.monotonic() + READY_S
        for queue, activity in wanted:
            while not await has_pollers(self.client, queue, activity=activity):
                dead = [f"extra{i}" for i, p in enumerate(self.extra_procs) if p.poll() is not None]
                dead += sorted(set(self.local) - set(running(self.settings)))
                if dead or time.monotonic() > deadline:
                    raise KernelOptError(
                        f"no worker polls {queue} ({', '.join(dead) or 'none'} exited, "
                        f"{time.monotonic() - deadline + READY_S:.0f} s); see {logs}/<name>.log"
                    )
                await asyncio.sleep(1.0)
        self.stream.event("workers_polling", queues=sorted({q for q, _ in wanted}))
        return self.client

    @property
    def serves_gpu(self) -> bool:
        """A GPU worker of ours runs: a local one, or an extra command still alive."""
        return any(n.startswith("gpu") for n in self.local) or any(
            p.poll() is None for p in self.extra_procs
        )

    def stop_workers(self) -> None:
        from kernelopt.local_workers import stop_local_workers

        for proc in self.extra_procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        stopped = stop_local_workers(self.settings)
        for proc in self.extra_procs:
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.stream.event("workers_stopped", local=stopped, extra=len(self.extra_procs))
        self.extra_procs = []

    def stop_server(self) -> None:
        from kernelopt.temporal_server import EmbeddedServer

        stopped = EmbeddedServer(self.settings).stop()
        if self.live is not None:
            self.live.unlink(missing_ok=True)
        self.stream.event("server_stopped", was_running=stopped)
