"""One zygote per GPU worker, shared by every gate activity it runs.

A fresh interpreter costs ~10 s on our H200 host (torch import, Inductor
import, CUDA context); a gate_candidate starts four of them (reference,
candidate, two timings).  Measured on the H200 (scripts/gpu_gate_cost.py,
level2 gemm+bias+relu): 48-52 s per gate_candidate with spawned children,
7.5-8.1 s with children forked from a preloaded zygote.

The activity bodies run in supervised children (activities/supervise.py), so
an in-process zygote would die with each activity.  Instead the worker
process owns one ``Zygote`` and serves it on a Unix socket; gate runners in
any descendant find it through ``KERNELOPT_ZYGOTE_SOCKET`` and fall back to
spawning when it is missing or broken (slower, same isolation).  Each forked
child is still a fresh process for everything that matters (own CUDA
context, allocator, module state), exactly as with ``fast_launch``.

Protocol: one JSON line per connection, ``{"workdir", "timeout_s"}`` (and
``"stall_s"`` for a job killed when it stops marking progress); the answer is
``{"returncode", "timed_out", "stalled"}`` or ``{"error"}``.  If the client
goes away first (its activity was cancelled), the job is killed.  A turn
child (``"turns": true``, ``gates.turns``) is answered ``{"started": PID}``
at once, then the client may send ``{"stop": true}``, ``{"cont": true}`` (with
``"all": true``: the whole tree), ``{"pin": CPU}`` and ``{"kill": true}`` on
the same connection, each acting on that job's child only and answered
``{"ack": "stopped" | "continued" | "pinned" | "refused"}`` once done.  A
``{"digests": [[path, inode, size, ctime_ns], ...]}`` request is answered from
the worker's ``DigestMemo`` (the compiler-cache guard's content digests).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import socketserver
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gates.cache_guard import DigestMemo
from gates.job_progress import StallWatch
from gates.runner import probe_zygote, zygote_env
from gates.zygote import Zygote, ZygoteError
from gates.zygote_client import DEVICE_ENV, SOCKET_ENV
from kernelopt.log import get_logger

log = get_logger(__name__)

# the socket's environment names are the client's; callers of the service find them here too
__all__ = ["DEVICE_ENV", "SOCKET_ENV", "DigestMemo", "ZygoteService", "start_for_worker"]


@dataclass
class _Job:
    workdir: str
    timeout_s: float
    stall_s: float | None = None
    turns: bool = False


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            raw = json.loads(self.rfile.readline() or b"{}")
            if "digests" in raw:
                memo = self.server.service.digests
                items = [(str(i[0]), (int(i[1]), int(i[2]), int(i[3]))) for i in raw["digests"]]
                self._answer({"digests": [memo.digest(p, st) for p, st in items]})
                return
            stall = raw.get("stall_s")
            job = _Job(
                workdir=str(raw["workdir"]),
                timeout_s=float(raw["timeout_s"]),
                stall_s=None if stall is None else float(stall),
                turns=raw.get("turns") is True,
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self._answer({"error": f"bad request: {exc}"})
            return
        try:
            code, killed = self.server.service.run(job, self.connection)
        except ZygoteError as exc:
            self._answer({"error": str(exc)})
            return
        self._answer({"returncode": code, "timed_out": bool(killed), "stalled": killed == "stall"})

    def _answer(self, payload: dict) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write((json.dumps(payload) + "\n").encode())
            self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    service: ZygoteService


class ZygoteService:
    """The worker's zygote and the socket it is served on."""

    def __init__(self, device: str, path: str) -> None:
        self.device = device
        self.path = path
        self._zygote: Zygote | None = None
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        # every zygote is started on this one long-lived thread: the sandbox ties a zygote
        # to the thread that started it (bwrap's --die-with-parent), and requests are served
        # on threads that end with the request
        self._owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zygote-{device}")
        self.jobs = 0
        self.abandoned = 0
        self.digests = DigestMemo()

    def _new_zygote(self) -> Zygote:
        return self._owner.submit(Zygote, zygote_env(self.device), start_timeout_s=120.0).result()

    def start(self, *, probe: bool = True) -> str:
        """Start the zygote (and prove it with one real job), then serve; a note on how."""
        started = time.monotonic()
        self._zygote = self._new_zygote()
        note = "zygote ready"
        if probe:
            outcome = probe_zygote(self._zygote, self.device)
            if not outcome.ok:
                self.close()
                raise ZygoteError(f"zygote probe failed: {outcome.describe()}")
            note = f"zygote ready, probe {outcome.wall_s:.1f} s"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._server = _Server(self.path, _Handler)
        self._server.service = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"{note} ({time.monotonic() - started:.1f} s)"

    def _live_zygote(self) -> Zygote:
        with self._lock:
            if self._zygote is None or not self._zygote.alive:
                if self._zygote is not None:
                    log.warning("zygote died; starting a new one", device=self.device)
                    self._zygote.close()
                self._zygote = self._new_zygote()
            return self._zygote

    def run(self, job: _Job, client: socket.socket) -> tuple[int | None, str]:
        """Fork the job, wait for it, kill it on timeout, stall or when the client leaves.

        Returns the exit code and "" or why it was killed ("timeout", "stall").
        """
        zygote = self._live_zygote()
        pid = zygote.spawn(Path(job.workdir))
        self.jobs += 1
        watch = StallWatch(zygote.workdir_of(pid, Path(job.workdir)), job.stall_s)
        deadline = time.monotonic() + job.timeout_s
        code: int | None = None
        killed = ""
        turns = _TurnRequests(zygote, pid, client) if job.turns else None
        while True:
            if turns is not None:
                code = zygote.wait(pid, 0.0) if turns.serve(0.05) else None
                if turns.gone:
                    log.info("gate client left; killing its turn child", pid=pid)
                    self.abandoned += 1
                    break
            else:
                code = zygote.wait(pid, 0.5 if job.stall_s is None else 0.05)
            if code is not None:
                break
            if time.monotonic() > deadline:
                killed = "timeout"
                break
            if watch.stalled():
                killed = "stall"
                break
            if turns is None and _client_gone(client):
                log.info("gate client left; killing its job", pid=pid)
                self.abandoned += 1
                break
        if code is None:
            zygote.kill(pid)
            code = zygote.wait(pid, 30.0)
        zygote.kill(pid)  # the job's process group: anything it spawned
        return code, killed

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        self._owner.shutdown(wait=False)


class _TurnRequests:
    """A turn child's requests on its job's connection, served between checks of the job."""

    def __init__(self, zygote: Zygote, pid: int, client: socket.socket) -> None:
        self.zygote, self.pid, self.client = zygote, pid, client
        self.gone = False
        self._buffer = b""
        self._send({"started": pid})

    def _send(self, payload: dict) -> None:
        with contextlib.suppress(OSError):
            self.client.sendall((json.dumps(payload) + "\n").encode())

    def serve(self, wait_s: float) -> bool:
        """Answer what the client asked within ``wait_s``; True when nothing more is waiting."""
        readable, _, _ = select.select([self.client], [], [], wait_s)
        if not readable:
            return True
        try:
            chunk = self.client.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.gone = True
            return False
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._send({"ack": self._act(line)})
        return True

    def _act(self, line: bytes) -> str:
        try:
            request = json.loads(line)
            if request.get("stop") is True:
                self.zygote.stop(self.pid)
                return "stopped"
            if request.get("cont") is True:
                self.zygote.cont(self.pid, whole=request.get("all") is True)
                return "continued"
            if isinstance(request.get("pin"), int):
                self.zygote.pin(self.pid, int(request["pin"]))
                return "pinned"
            if request.get("kill") is True:
                self.zygote.kill(self.pid)
                return "killed"
        except (ValueError, AttributeError, ZygoteError) as exc:
            log.warning("turn request failed", pid=self.pid, reason=str(exc)[:200])
        return "refused"


def _client_gone(client: socket.socket) -> bool:
    readable, _, _ = select.select([client], [], [], 0)
    if not readable:
        return False
    try:
        return client.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def default_socket_path(tag: str) -> str:
    """Short enough for AF_UNIX (108 bytes) wherever KERNELOPT_HOME lives."""
    return str(Path(tempfile.gettempdir()) / f"kernelopt-zygote-{tag}-{os.getpid()}.sock")


def start_for_worker(device: str, tag: str) -> ZygoteService | None:
    """Start the shared zygote and export its socket to this process's future children.

    Returns None (and logs why) when it cannot start: gate jobs then spawn
    fresh interpreters, which is slower but equally isolated.
    """
    service = ZygoteService(device, default_socket_path(tag))
    try:
        note = service.start()
    except (ZygoteError, OSError) as exc:
        log.warning("gate jobs will spawn fresh interpreters", reason=str(exc))
        return None
    # Set after the zygote started: its forked jobs must not see the socket.
    os.environ[SOCKET_ENV] = service.path
    os.environ[DEVICE_ENV] = device
    log.info("gate jobs fork from the worker's zygote", note=note, socket=service.path)
    return service
