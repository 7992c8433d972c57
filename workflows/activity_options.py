"""Timeouts, retries and heartbeats for every activity call site, in one place.

Temporal owns retries (docs/architecture.md#retries): infrastructure failures are retried
with backoff, deterministic ones (a broken problem file, a malformed reply the
model will not fix) are raised non-retryable by the activities themselves.
Every activity heartbeats (GPU ones through their supervisor, CPU ones through
``activities.heartbeat``); the heartbeat timeout is what notices a worker that
died mid-activity and hands the work to another attempt, so a dead worker costs
a campaign one heartbeat timeout, not a start-to-close timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.common import RetryPolicy

NON_RETRYABLE = [
    "ProblemError",
    "ConfigError",
    "DeterministicError",
    "NoGpuError",
    "ValidationError",
]


@dataclass(frozen=True)
class CallOptions:
    start_to_close: timedelta
    heartbeat: timedelta | None = None
    attempts: int = 5
    gpu: bool = False  # a GPU call site: the campaign's ``gpu_heartbeat_s`` applies to it
    retry: RetryPolicy = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "retry",
            RetryPolicy(
                initial_interval=timedelta(seconds=2),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(minutes=2),
                maximum_attempts=self.attempts,
                non_retryable_error_types=NON_RETRYABLE,
            ),
        )

    def with_heartbeat(self, seconds: float | None) -> CallOptions:
        """This call site with the campaign's GPU heartbeat timeout (None: ours).

        A shorter timeout notices a dead GPU worker sooner (preemptible fleets);
        timeouts are not part of the commands a workflow issues, so histories
        replay whatever the number.
        """
        if seconds is None or self.heartbeat is None or not self.gpu:
            return self
        return CallOptions(
            start_to_close=self.start_to_close,
            heartbeat=timedelta(seconds=seconds),
            attempts=self.attempts,
            gpu=True,
        )

    def kwargs(self) -> dict:
        out: dict = {"start_to_close_timeout": self.start_to_close, "retry_policy": self.retry}
        if self.heartbeat is not None:
            out["heartbeat_timeout"] = self.heartbeat
        return out


MINUTE = timedelta(minutes=1)
# CPU activities beat every 5 s from the event loop (``activities.heartbeat``): a dead CPU
# worker's activity is retried ~30 s after its last beat instead of after 10 minutes.
CPU_HEARTBEAT = timedelta(seconds=30)

COMPILE = CallOptions(start_to_close=120 * MINUTE, heartbeat=2 * MINUTE, attempts=4, gpu=True)
SEGMENT = CallOptions(start_to_close=10 * MINUTE, heartbeat=CPU_HEARTBEAT, attempts=3)
TRIAGE = CallOptions(start_to_close=60 * MINUTE, heartbeat=2 * MINUTE, attempts=4, gpu=True)
PROFILE = CallOptions(start_to_close=30 * MINUTE, heartbeat=2 * MINUTE, attempts=3, gpu=True)
GATE_CANDIDATE = CallOptions(start_to_close=30 * MINUTE, heartbeat=2 * MINUTE, attempts=4, gpu=True)
RESTITCH = CallOptions(start_to_close=30 * MINUTE, heartbeat=2 * MINUTE, attempts=4, gpu=True)
GATE_MODEL = CallOptions(start_to_close=60 * MINUTE, heartbeat=2 * MINUTE, attempts=4, gpu=True)
LLM = CallOptions(start_to_close=15 * MINUTE, heartbeat=CPU_HEARTBEAT, attempts=6)
# batch / folder mode's short steps (prepare, submit, poll, answer): the waiting is timers
LLM_STEP = CallOptions(start_to_close=10 * MINUTE, heartbeat=CPU_HEARTBEAT, attempts=6)
BUILTIN = CallOptions(start_to_close=10 * MINUTE, heartbeat=CPU_HEARTBEAT, attempts=3)
BUILTIN_GPU = CallOptions(start_to_close=15 * MINUTE, heartbeat=2 * MINUTE, attempts=3, gpu=True)
REPORT = CallOptions(start_to_close=10 * MINUTE, heartbeat=CPU_HEARTBEAT, attempts=5)
