"""Ctrl-C for the command line: our own SIGINT handler and one honest line when it lands.

A process started as a background job or by some supervisors inherits SIGINT as
*ignored*, and Python keeps it ignored; Ctrl-C (or ``kill -INT``) would then do
nothing. The CLI therefore installs Python's default handler itself, so detaching
from a campaign or interrupting start-up never depends on how it was launched.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for a Ctrl-C


def install_sigint_handler() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` whatever disposition the process inherited.

    Only the main thread may set handlers; ``main()`` called from a thread (tests)
    leaves the process's handler alone.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # a blocked SIGINT (inherited mask) would stay pending forever: unblock it too
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@dataclass
class StartupTrace:
    """What a command has done so far, so an interruption can say what is left behind."""

    started: list[str] = field(default_factory=list)  # "the Temporal dev server", "workers"
    submitted: str | None = None  # campaign id once the workflow exists

    def interrupted_message(self, command: str) -> str:
        if self.submitted:
            return (
                f"interrupted: campaign {self.submitted} was submitted and keeps running; "
                f"`kernelopt show {self.submitted}` to look, "
                f"`kernelopt cancel {self.submitted}` to stop it"
            )
        text = f"interrupted: {command} stopped before anything was submitted"
        if self.started:
            text += (
                f"; {' and '.join(self.started)} started in the background keep running "
                "(`kernelopt server stop` stops them)"
            )
        return text


__all__ = ["INTERRUPTED_EXIT", "StartupTrace", "install_sigint_handler"]
