"""Heartbeats for CPU activities, so a dead CPU worker is noticed in seconds, not minutes.

Without heartbeats a CPU activity whose worker was SIGKILLed is only retried
when its start-to-close timeout runs out (10 minutes: issue 25 measured 602-s
stalls).  Every CPU activity runs its body inside ``heartbeating()``: a task on
the worker's event loop heartbeats every few seconds while the body works (in a
thread via ``in_thread``, or awaiting an LLM), and the call site's heartbeat
timeout (``workflows.activity_options.CPU_HEARTBEAT``) hands the work to another
attempt once the beats stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from kernelopt.errors import DeterministicError

T = TypeVar("T")

# Well below the 30-s heartbeat timeout; the SDK throttles what it sends anyway.
HEARTBEAT_EVERY_S = 5.0


@contextlib.asynccontextmanager
async def heartbeating(
    every_s: float | None = None, held: Callable[[], float] | None = None
) -> AsyncIterator[None]:
    """Heartbeat from the event loop until the block ends (a no-op outside an activity).

    ``every_s=None`` reads ``HEARTBEAT_EVERY_S`` at entry, so a test worker with a
    shorter CPU heartbeat timeout can beat faster without another code path.  With
    ``held`` (a GPU step's clock), each beat carries the GPU time held so far, as the
    supervised children's beats do (``activities.supervise``).
    """
    if not activity.in_activity():
        yield
        return
    period = HEARTBEAT_EVERY_S if every_s is None else every_s

    async def beat() -> None:
        while True:
            if held is None:
                activity.heartbeat()
            else:
                activity.heartbeat(None, held())
            await asyncio.sleep(period)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def in_thread(fn: Callable[..., T], /, *args: Any) -> T:
    """``fn(*args)`` in a worker thread while this activity heartbeats."""
    async with heartbeating():
        return await asyncio.to_thread(fn, *args)


async def in_thread_final(fn: Callable[..., T], /, *args: Any) -> T:
    """``in_thread``, a ``DeterministicError`` raised non-retryable: another attempt cannot help."""
    try:
        return await in_thread(fn, *args)
    except DeterministicError as exc:
        raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc


# --- GPU time held by attempts that do not finish -------------------------------------------------
# A GPU step's beats carry (detail, seconds held so far, earlier attempts included).  A retry
# reads the last beat of the attempt before it; an attempt cut by its worker's shutdown says
# in its failure what it held, and a heartbeat timeout's failure carries the last beat, so the
# workflow charges attempts that were lost with their machines (``workflows.machine_loss``).


class HeldClock:
    """The GPU seconds this activity has held: earlier attempts' (from the last heartbeat
    before this attempt) plus this attempt's since the clock was made."""

    def __init__(self) -> None:
        self.earlier = 0.0
        if activity.in_activity():
            details = activity.info().heartbeat_details
            if len(details) > 1 and isinstance(details[1], int | float):
                self.earlier = float(details[1])
        self.started = time.monotonic()

    def __call__(self) -> float:
        return self.earlier + time.monotonic() - self.started


@contextlib.contextmanager
def reporting_loss(held: HeldClock) -> Iterator[None]:
    """A cancel from this worker's shutdown leaves the block as ``WorkerShutdown`` carrying
    the GPU time held (any other cancel stays a cancel)."""
    try:
        yield
    except asyncio.CancelledError:
        if activity.in_activity() and activity.is_worker_shutdown():
            raise ApplicationError(
                f"the worker shut down before this attempt finished ({held():.1f} GPU-s held)",
                held(),
                type="WorkerShutdown",
            ) from None
        raise
