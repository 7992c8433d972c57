"""``fast_launch`` whose zygote loads while the caller works, for a command's cold start.

A GPU zygote takes seconds to import torch, initialise CUDA and run its probe job, and a
cold ``kernelopt verify`` batch waited for it before preparing the reference, which is a
child of its own that can as well be spawned meanwhile.  Here the zygote starts on a
thread that owns it for its whole life: the sandbox's ``--die-with-parent`` ties the
zygote to the thread that started it, so that thread may only end once the zygote is
closed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from gates.runner import LaunchInfo, forking_from, verified_zygote
from gates.zygote import Zygote


class _Owner:
    """The thread that starts, keeps and closes one zygote."""

    def __init__(self, device: str, probe_timeout_s: float) -> None:
        self.device = device
        self.probe_timeout_s = probe_timeout_s
        self.zygote: Zygote | None = None
        self.info: LaunchInfo | None = None
        self.error: BaseException | None = None
        self._up = threading.Event()
        self._close = threading.Event()
        self._thread = threading.Thread(target=self._own, name=f"zygote-{device}", daemon=True)
        self._thread.start()

    def _own(self) -> None:
        try:
            with verified_zygote(self.device, probe_timeout_s=self.probe_timeout_s) as started:
                self.zygote, self.info = started
                self._up.set()
                self._close.wait()
        except BaseException as exc:  # handed to the caller by ``ready``
            self.error = exc
        finally:
            self._up.set()

    def ready(self) -> tuple[Zygote | None, LaunchInfo]:
        self._up.wait()
        if self.error is not None:
            raise self.error
        assert self.info is not None
        return self.zygote, self.info

    def close(self) -> None:
        self._close.set()
        self._thread.join()


@contextlib.contextmanager
def fast_launch_soon(
    device: str, *, probe_timeout_s: float = 120.0
) -> Iterator[Callable[[], LaunchInfo]]:
    """Start ``device``'s zygote now; the yielded ``ready()`` waits for it and from then on
    gate jobs fork from it (as inside ``fast_launch``).  Jobs launched before ``ready()``
    spawn fresh interpreters.  ``ready()`` may be called again: it registers once."""
    owner = _Owner(device, probe_timeout_s)
    registered = contextlib.ExitStack()
    done: list[LaunchInfo] = []

    def ready() -> LaunchInfo:
        if not done:
            zygote, info = owner.ready()
            registered.enter_context(forking_from(device, zygote))
            done.append(info)
        return done[0]

    try:
        yield ready
    finally:
        registered.close()
        owner.close()
