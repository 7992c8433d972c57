"""A step whose attempts are lost with their machines is issued again (patch
steps-ride-out-machine-losses); a step that fails by itself still fails.

The GPU-queue proposer double (the built-in proposer of a CUDA forward target) fails its
first calls the way a worker shutting down reports them, more often than the step has
attempts; each check uses the real dev server's retries.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio import activity
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

from kernelopt.contracts import names
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, SearchParams
from kernelopt.contracts.verdicts import GateSettings
from tests.workflows.test_search_kernel import Gpu, run_search, search_input
from workflows.activity_options import BUILTIN_GPU
from workflows.machine_loss import lost_seconds, reported_seconds


class LosingProposer(Gpu):
    """The GPU doubles; the proposer's first ``failures`` calls fail with ``error_type``,
    each saying it held the GPU ``lost_s`` seconds (as ``activities.heartbeat`` reports)."""

    def __init__(self, failures: int, error_type: str, lost_s: float | None = None) -> None:
        super().__init__()
        self.failures = failures
        self.error_type = error_type
        self.lost_s = lost_s
        self.calls = 0

    def propose_on_gpu_activity(self):
        @activity.defn(name=names.PROPOSE_BUILTIN_GPU)
        async def propose_on_gpu(inp: BuiltinProposeInput) -> BuiltinProposeResult:
            self.calls += 1
            if self.calls <= self.failures:
                details = () if self.lost_s is None else (self.lost_s,)
                raise ApplicationError("the step's attempt ended", *details, type=self.error_type)
            return BuiltinProposeResult(
                variants=[], note="proposed after the losses", device_seconds=PROPOSE_S
            )

        return propose_on_gpu


PROPOSE_S = 2.0  # what the double's successful attempt held


async def _search(env, store, gpu: LosingProposer):
    inp = search_input(
        store, f"loss-{uuid.uuid4().hex[:6]}", params=SearchParams(iterations=1), use_llm=False
    )
    target = SearchTarget(
        id="forward-t",
        kind=TargetKind.FORWARD,
        kernels=inp.target.kernels,
        source=inp.target.source,
    )
    inp = inp.model_copy(update={"target": target, "gates": GateSettings(device="cuda")})
    result, _ = await run_search(env, inp, gpu)
    return result


async def test_attempts_lost_with_their_machines_do_not_end_the_step(env, store):
    gpu = LosingProposer(BUILTIN_GPU.attempts + 1, "WorkerShutdown")
    result = await _search(env, store, gpu)
    assert gpu.calls == BUILTIN_GPU.attempts + 2  # issued again once, with fresh attempts
    assert "proposed after the losses" in result.stopped_reason


async def test_a_step_failing_by_itself_still_fails_after_its_attempts(env, store):
    gpu = LosingProposer(BUILTIN_GPU.attempts + 1, "RuntimeError")
    result = await _search(env, store, gpu)
    assert gpu.calls == BUILTIN_GPU.attempts  # not issued again
    assert "proposed after the losses" not in result.stopped_reason


async def test_gpu_time_of_lost_issues_and_of_the_proposer_is_charged(env, store):
    """Issue 31: GPU-seconds are charged continuously across machine losses.  One issue's
    attempts are all lost (its last reports 7.5 s held, earlier attempts included); the
    next issue's proposer holds the GPU 2 s; the search charges both."""
    quiet = await _search(env, store, LosingProposer(0, "WorkerShutdown"))
    lost = await _search(env, store, LosingProposer(BUILTIN_GPU.attempts, "WorkerShutdown", 7.5))
    assert "proposed after the losses" in lost.stopped_reason
    assert quiet.gpu_seconds >= PROPOSE_S
    assert lost.gpu_seconds - quiet.gpu_seconds == pytest.approx(7.5, abs=0.5)


def _lost(cause: BaseException) -> ActivityError:
    error = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="gpu-worker",
        activity_type=names.PROPOSE_BUILTIN_GPU,
        activity_id="1",
        retry_state=None,
    )
    error.__cause__ = cause
    return error


def test_the_held_time_is_read_from_either_kind_of_loss() -> None:
    shutdown = ApplicationError("cut", 12.5, type="WorkerShutdown")
    silent = TimeoutError("no beat", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[{}, 40.0])
    assert lost_seconds(_lost(shutdown)) == 12.5
    assert lost_seconds(_lost(silent)) == 40.0
    # a loss that says nothing (the core's own shutdown failure, an old worker) charges 0
    assert lost_seconds(_lost(ApplicationError("cut", type="WorkerShutdown"))) == 0.0
    assert (
        lost_seconds(
            _lost(TimeoutError("x", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[]))
        )
        == 0.0
    )


def test_only_a_number_first_in_a_failures_details_is_a_reported_run_time() -> None:
    """What a failed step is charged (``failed_run_seconds``) reads the same first detail."""
    assert reported_seconds(_lost(ApplicationError("x", 2.5, type="ChildError"))) == 2.5
    assert reported_seconds(_lost(ApplicationError("x", type="ChildError"))) is None
    assert reported_seconds(_lost(ApplicationError("x", "text", type="ChildError"))) is None
    assert reported_seconds(_lost(ApplicationError("x", -1.0, type="ChildError"))) == 0.0
