"""The gate side of the worker's zygote socket (``gates.zygote_service`` serves it).

Gate runners and the compiler-cache guard ask the worker's shared zygote to run
a job or to hash cache files; they live below the service, which builds on
both (it starts its zygote with the runner's environment and hashes with the
guard's digest), so the client half is its own module.  See
``gates.zygote_service`` for the protocol.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gates.proctree import SignalFailed

SOCKET_ENV = "KERNELOPT_ZYGOTE_SOCKET"
DEVICE_ENV = "KERNELOPT_ZYGOTE_DEVICE"
# A job's answer may come this long after its own timeout (kill + reap).
_ANSWER_GRACE_S = 60.0
# Hashing a whole cold cache (tens of thousands of files) takes seconds, not minutes.
_DIGEST_TIMEOUT_S = 300.0
ACK_TIMEOUT_S = 10.0  # a turn child's stop, cont or pin unanswered this long fails its session


class ServiceError(RuntimeError):
    """The shared zygote could not run a job (the caller spawns instead, unless ``started``:
    then a turn session already holds the forked child)."""

    def __init__(self, message: str, *, started: bool = False) -> None:
        super().__init__(message)
        self.started = started


class ServiceTree:
    """A turn child forked by the worker's zygote: its tree stopped, resumed, pinned and
    killed through the job's own connection (the service acts on that job's PID only)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._acks: list[str] = []
        self._closed = False

    def _ack(self, word: str) -> None:
        with self._cond:
            self._acks.append(word)
            self._cond.notify_all()

    def _gone(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _command(self, request: dict[str, object], ack: str) -> None:
        try:
            with self._lock:
                self._sock.sendall((json.dumps(request) + "\n").encode())
        except OSError as exc:
            raise SignalFailed(f"zygote service did not take {request}: {exc}") from exc
        with self._cond:
            if not self._cond.wait_for(lambda: self._acks or self._closed, ACK_TIMEOUT_S):
                raise SignalFailed(f"zygote service gave no {ack!r} within {ACK_TIMEOUT_S:g} s")
            got = self._acks.pop(0) if self._acks else "closed"
        if got != ack:
            raise SignalFailed(f"zygote service answered {got!r} to {request}, not {ack!r}")

    def stop(self) -> int:
        self._command({"stop": True}, "stopped")
        return time.perf_counter_ns()

    def cont(self) -> None:
        self._command({"cont": True}, "continued")

    def release(self) -> None:
        self._command({"cont": True, "all": True}, "continued")

    def pin(self, cpu: int) -> None:
        self._command({"pin": cpu}, "pinned")

    def kill(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._sock.sendall(b'{"kill": true}\n')


def run_via_service(
    path: str,
    workdir: Path,
    timeout_s: float,
    stall_s: float | None = None,
    *,
    on_start: Callable[[ServiceTree], None] | None = None,
) -> tuple[int | None, str]:
    """Ask the worker's zygote to run one gate job: its exit code, and "" or why it was
    killed ("timeout", or "stall" when it marked no progress for ``stall_s``).

    With ``on_start`` (a turn session) the service first answers with the started
    child and then takes stop, cont, pin and kill requests on the same connection.
    """
    started = False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10.0)
            sock.connect(path)
            request: dict[str, object] = {"workdir": str(workdir), "timeout_s": timeout_s}
            if stall_s is not None:
                request["stall_s"] = stall_s
            if on_start is not None:
                request["turns"] = True
            sock.sendall((json.dumps(request) + "\n").encode())
            sock.settimeout(timeout_s + _ANSWER_GRACE_S)
            lines = sock.makefile("rb")
            answer = lines.readline()
            if on_start is not None and answer:
                tree = ServiceTree(sock)
                try:
                    if "started" not in json.loads(answer):
                        raise ServiceError(f"zygote service did not start the job: {answer!r}")
                    started = True
                    on_start(tree)
                    answer = lines.readline()
                    while answer and "ack" in json.loads(answer):
                        tree._ack(str(json.loads(answer)["ack"]))
                        answer = lines.readline()
                finally:
                    tree._gone()
    except OSError as exc:
        raise ServiceError(f"zygote service at {path} unreachable: {exc}", started=started) from exc
    if not answer:
        raise ServiceError(
            "zygote service closed the connection without an answer", started=started
        )
    reply = json.loads(answer)
    if "error" in reply:
        raise ServiceError(str(reply["error"]), started=started)
    killed = "stall" if reply.get("stalled") else "timeout" if reply.get("timed_out") else ""
    return reply.get("returncode"), killed


def request_digests(path: str, items: list[tuple[str, tuple[int, int, int]]]) -> list[str | None]:
    """Content digests of cache files in the given states, from the worker's memo."""
    request = {"digests": [[p, *state] for p, state in items]}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(_DIGEST_TIMEOUT_S)
            sock.connect(path)
            sock.sendall((json.dumps(request) + "\n").encode())
            answer = sock.makefile("rb").readline()
    except OSError as exc:
        raise ServiceError(f"zygote service at {path} unreachable: {exc}") from exc
    try:
        digests = json.loads(answer)["digests"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ServiceError(f"bad digest answer: {exc}") from exc
    if not isinstance(digests, list) or len(digests) != len(items):
        raise ServiceError("digest answer does not match the request")
    return digests
