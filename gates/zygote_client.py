"""The gate side of the worker's zygote socket (``gates.zygote_service`` serves it).

Gate runners and the compiler-cache guard ask the worker's shared zygote to run
a job or to hash cache files; they live below the service, which builds on
both (it starts its zygote with the runner's environment and hashes with the
guard's digest), so the client half is its own module.  See
``gates.zygote_service`` for the protocol.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

SOCKET_ENV = "KERNELOPT_ZYGOTE_SOCKET"
DEVICE_ENV = "KERNELOPT_ZYGOTE_DEVICE"
# A job's answer may come this long after its own timeout (kill + reap).
_ANSWER_GRACE_S = 60.0
# Hashing a whole cold cache (tens of thousands of files) takes seconds, not minutes.
_DIGEST_TIMEOUT_S = 300.0


class ServiceError(RuntimeError):
    """The shared zygote could not run a job (the caller spawns instead)."""


def run_via_service(
    path: str, workdir: Path, timeout_s: float, stall_s: float | None = None
) -> tuple[int | None, str]:
    """Ask the worker's zygote to run one gate job: its exit code, and "" or why it was
    killed ("timeout", or "stall" when it marked no progress for ``stall_s``)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10.0)
            sock.connect(path)
            request: dict[str, object] = {"workdir": str(workdir), "timeout_s": timeout_s}
            if stall_s is not None:
                request["stall_s"] = stall_s
            sock.sendall((json.dumps(request) + "\n").encode())
            sock.settimeout(timeout_s + _ANSWER_GRACE_S)
            answer = sock.makefile("rb").readline()
    except OSError as exc:
        raise ServiceError(f"zygote service at {path} unreachable: {exc}") from exc
    if not answer:
        raise ServiceError("zygote service closed the connection without an answer")
    reply = json.loads(answer)
    if "error" in reply:
        raise ServiceError(str(reply["error"]))
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
