"""How a ``kernelopt`` process that talked to Temporal ends: without interpreter finalisation.

The Temporal SDK's client runs on a Rust (tokio) thread pool that hands every RPC
result back to Python by taking the GIL on one of those threads.  A hand-back that
is still waiting for the GIL when CPython starts finalising is torn down inside
``PyGILState_Release`` and the whole process aborts ("Fatal Python error:
PyGILState_Release: thread state ... must be current when releasing", SIGABRT)
after the command itself succeeded: temporalio/sdk-python#300, reproduced here by
running ``kernelopt reply`` in a loop.  The SDK has no call that stops those
threads, so a client command leaves through ``os._exit`` once everything a normal
exit does *before* finalising is done (the worker does the same in ``worker.py``).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

from kernelopt.cli.scoped import Scoped

UNCAUGHT_EXIT = 1  # what the interpreter exits with after an uncaught exception
FLUSH_FAILED_EXIT = 120  # what the interpreter exits with when it cannot flush stdout


class ExitBeforeFinalizing(Scoped):
    """Ends the process with the command's code as the interpreter's last exit handler.

    Registered with ``atexit`` when a client command starts, it runs after the
    interpreter has joined the non-daemon threads and run every exit handler
    registered later (handlers run last-in first-out), i.e. at the point where the
    only thing left is the finalisation that races the SDK's threads.  Handlers
    registered before it are skipped, so it runs the one that matters itself:
    ``logging.shutdown`` (flushes and closes log handlers).  Output and files
    written by the command are already with the kernel by then; ``os._exit`` only
    skips Python-level teardown.  Use it as a context manager around the command so
    the exit code it leaves with is the one the command produced.
    """

    def __init__(self) -> None:
        self.code = UNCAUGHT_EXIT  # until the command returns: an exception escaped it
        atexit.register(self._leave)

    def end(self, exc: BaseException | None) -> None:
        if isinstance(exc, SystemExit):
            self.code = system_exit_code(exc)

    def _leave(self) -> None:
        logging.shutdown()
        code = self.code
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):  # a closed pipe: a normal exit would fail too
                code = code or FLUSH_FAILED_EXIT
        os._exit(code)


def system_exit_code(exc: SystemExit) -> int:
    """The status the interpreter would exit with for this ``SystemExit``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    return UNCAUGHT_EXIT  # sys.exit("message"): printed to stderr by the interpreter, status 1


__all__ = ["ExitBeforeFinalizing", "system_exit_code"]
