"""Steps ride out lost machines: a worker that went away does not spend a step's attempts.

Temporal counts every attempt against ``maximum_attempts``, whatever ended it. On a
fleet that preempts machines, one long step (a large model's compile, a regeneration)
can be cut by several losses in a row and then fail for good, although nothing was
wrong with it. An attempt whose worker shut down (``WorkerShutdown``) or stopped
heartbeating was lost with its machine: the step is issued again, with fresh attempts,
up to ``MAX_LOSSES`` times; every other failure is the step's own. Not yet charged: the
GPU time of an issue whose attempts were all lost (a retry inside one issue is charged
through its heartbeats; a new issue starts without them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

T = TypeVar("T")

LOSS_PATCH = "steps-ride-out-machine-losses"
# losses one step may ride out beyond its own attempts: a step runs minutes and machines are
# lost every few hours, so more than a dozen in a row is a step that takes its worker down
# with it (a poison step), which must end rather than kill workers forever
MAX_LOSSES = 12


def lost_with_machine(exc: ActivityError) -> bool:
    """The step's last attempt ended because its worker went away, not by its own failure."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.type == "WorkerShutdown"
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.HEARTBEAT


async def riding_out_losses(name: str, start: Callable[[], Awaitable[T]]) -> T:
    """``await start()``, issued again after each attempt lost with its machine."""
    losses = 0
    while True:
        try:
            return await start()
        except ActivityError as exc:
            if losses >= MAX_LOSSES or not lost_with_machine(exc):
                raise
            # decided only when a loss happens: histories from before replay as they ran
            if not workflow.patched(LOSS_PATCH):
                raise
            losses += 1
            workflow.logger.warning(
                "%s: its attempts were lost with their machines (%s); issued again (%d of %d)",
                name,
                exc.cause,
                losses,
                MAX_LOSSES,
            )
