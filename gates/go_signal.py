"""An authenticated go/stop for a child started ahead of its turn (``GateSettings.prestart_timing``).

A prestarted timing child builds the trusted baseline while gates 1-3 run and
then waits for a file in its own workdir.  Children of one sandboxed zygote
can see each other's stages, so the candidate child running beside it could
write that file: the job carries only the sha256 of a random nonce, and the
parent writes the nonce itself once the candidate child has exited.  A
candidate cannot forge a go it cannot know, nor a stop.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from pathlib import Path

from gates.job_progress import job_file
from gates.sandbox_stage import LIVE_FILE

SIGNAL_FILE = "go_signal"  # in the waiting child's workdir
_POLL_S = 0.005


class Stopped(RuntimeError):
    """The parent said stop: gates 1-3 did not pass, nothing of the candidate is timed."""


def _digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


class GoSignal:
    """Parent side: the nonce, its digest for the job, and the file that delivers it."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(32)
        self.digest = _digest(self._nonce)

    def send(self, live_dir: Path, *, go: bool) -> None:
        """Write go (or stop) into the waiting child's workdir, atomically."""
        tmp = live_dir / f".{SIGNAL_FILE}.{os.getpid()}"
        tmp.write_text(f"{'go' if go else 'stop'} {self._nonce}")
        os.replace(tmp, live_dir / SIGNAL_FILE)


def live_workdir(workdir: Path) -> Path:
    """Where the child started on ``workdir`` reads and writes while it runs.

    A sandboxed zygote stages each job (``gates.sandbox_stage``) and notes the
    staged workdir in ``LIVE_FILE``; a spawned child uses ``workdir`` itself.
    """
    pointer = Path(workdir) / LIVE_FILE
    try:
        return Path(pointer.read_text().strip())
    except OSError:
        return Path(workdir)


def wait_for_go(digest: str, timeout_s: float) -> None:
    """Child side: return on the parent's go; raise ``Stopped`` on its stop or on no word.

    A signal file whose nonce does not match ``digest`` is not the parent's:
    it is ignored (and removed), and the wait goes on.
    """
    path = job_file(SIGNAL_FILE)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            word, _, nonce = path.read_text().partition(" ")
        except OSError:
            time.sleep(_POLL_S)
            continue
        if secrets.compare_digest(_digest(nonce), digest):
            if word == "go":
                return
            raise Stopped("gates 1-3 did not pass: the prestarted child stops")
        path.unlink(missing_ok=True)
    raise Stopped(f"no go within {timeout_s:g} s")
