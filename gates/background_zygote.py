"""``fast_launch`` whose zygote loads while the caller works, for a command's cold start.

A GPU zygote takes seconds to import torch, initialise CUDA and run its probe job, and a
cold ``kernelopt verify`` waited for it before preparing the reference, which is a child
of its own that can as well be spawned meanwhile.  Here the zygote is started, kept and
closed by one thread of a one-thread executor: the sandbox's ``--die-with-parent`` ties a
zygote to the thread that started it, so that thread may only end once the zygote is
closed (``ZygoteService`` starts its zygotes the same way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from gates.runner import LaunchInfo, forking_from, verified_zygote


@contextlib.contextmanager
def fast_launch_soon(
    device: str, *, probe_timeout_s: float = 120.0
) -> Iterator[Callable[[], LaunchInfo]]:
    """Start ``device``'s zygote now; the yielded ``ready()`` waits for it and from then on
    gate jobs fork from it (as inside ``fast_launch``).  Jobs launched before ``ready()``
    spawn fresh interpreters.  ``ready()`` may be called again: it registers once; a zygote
    that could not start raises there."""
    owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zygote-{device}")
    kept = contextlib.ExitStack()  # entered and closed on the owner's thread only
    starting = owner.submit(
        kept.enter_context, verified_zygote(device, probe_timeout_s=probe_timeout_s)
    )
    registered = contextlib.ExitStack()
    done: list[LaunchInfo] = []

    def ready() -> LaunchInfo:
        if not done:
            zygote, info = starting.result()
            registered.enter_context(forking_from(device, zygote))
            done.append(info)
        return done[0]

    try:
        yield ready
    finally:
        registered.close()
        owner.submit(kept.close).result()  # after the start, whatever it came to
        owner.shutdown()
