"""Steps ride out lost machines: a worker that went away does not spend a step's attempts.

Temporal counts every attempt against ``maximum_attempts``, whatever ended it. On a
fleet that preempts machines, one long step (a large model's compile, a regeneration)
can be cut by several losses in a row and then fail for good, although nothing was
wrong with it. An attempt whose worker shut down (``WorkerShutdown``) or stopped
heartbeating was lost with its machine: the step is issued again, with fresh attempts,
up to ``MAX_LOSSES`` times; every other failure is the step's own. The GPU time a lost
issue held is charged: its last attempt says it in its failure (``WorkerShutdown``'s
details, or the last heartbeat of a timed-out one), earlier attempts' time included
(``activities.heartbeat``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

T = TypeVar("T")

LOSS_PATCH = "steps-ride-out-machine-losses"
# GPU time of lost issues and of the built-in proposer's GPU step is charged; histories
# from before replay without the charge they did not make
CHARGE_PATCH = "charge-lost-and-proposer-gpu-time"
# a failed GPU step is charged the run time it reported, not its wall time since it was
# scheduled; histories from before replay with the charge they made
FAILED_RUN_PATCH = "charge-failed-step-run-time"
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


def reported_seconds(exc: ActivityError) -> float | None:
    """The GPU time a step's attempts held, as its last attempt reported it: the first
    detail of its failure (``activities.supervise``, ``activities.heartbeat``) or its last
    heartbeat's; None where it said nothing (an older worker, no heartbeat yet)."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        details, index = cause.details, 0
    elif isinstance(cause, TimeoutError):
        details, index = cause.last_heartbeat_details, 1  # (detail, held)
    else:
        return None
    if len(details) > index and isinstance(details[index], int | float):
        return max(0.0, float(details[index]))
    return None


def lost_seconds(exc: ActivityError) -> float:
    """The GPU time a lost issue's attempts held, as its last attempt reported it (0: none)."""
    return reported_seconds(exc) or 0.0


def failed_run_seconds(exc: ActivityError) -> float | None:
    """What a GPU step that failed is charged: the run time its attempts reported, not the
    wall time since it was scheduled, which includes its wait in the queue and for the
    GPU's lease.  None where it reported none, or in a history from before: the caller's
    older rule applies."""
    held = reported_seconds(exc)
    if held is None or not workflow.patched(FAILED_RUN_PATCH):
        return None
    return held


async def riding_out_losses(
    name: str,
    start: Callable[[], Awaitable[T]],
    on_loss: Callable[[float], None] | None = None,
) -> T:
    """``await start()``, issued again after each attempt lost with its machine; ``on_loss``
    hears the GPU seconds each lost issue held."""
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
            if on_loss is not None and workflow.patched(CHARGE_PATCH):
                on_loss(lost_seconds(exc))
            workflow.logger.warning(
                "%s: its attempts were lost with their machines (%s); issued again (%d of %d)",
                name,
                exc.cause,
                losses,
                MAX_LOSSES,
            )
