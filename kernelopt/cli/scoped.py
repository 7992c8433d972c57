"""One typed ``__exit__`` for the CLI's context managers: each says only what ending does.

``ExitBeforeFinalizing`` and ``ProgressWatcher`` both act on how the command's body
ended (its ``SystemExit``, or whether it raised at all) and nothing else of the
exception protocol, so they share this base instead of repeating the signature.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Scoped:
    """A context manager around a command's body: ``begin`` on entry, ``end(exc)`` on exit.

    ``end`` gets the exception that ended the body (None when it returned) and never
    swallows it.
    """

    def begin(self) -> None:
        """What entering does; nothing unless a subclass says."""

    def end(self, exc: BaseException | None) -> None:
        """What leaving does, given the exception that ended the body, or None."""

    def __enter__(self) -> Self:
        self.begin()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end(exc)
