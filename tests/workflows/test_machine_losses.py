"""A step whose attempts are lost with their machines is issued again (patch
steps-ride-out-machine-losses); a step that fails by itself still fails.

The GPU-queue proposer double (the built-in proposer of a CUDA forward target) fails its
first calls the way a worker shutting down reports them, more often than the step has
attempts; each check uses the real dev server's retries.
"""

from __future__ import annotations

import uuid

from temporalio import activity
from temporalio.exceptions import ApplicationError

from kernelopt.contracts import names
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, SearchParams
from kernelopt.contracts.verdicts import GateSettings
from tests.workflows.test_search_kernel import Gpu, run_search, search_input
from workflows.activity_options import BUILTIN_GPU


class LosingProposer(Gpu):
    """The GPU doubles; the proposer's first ``failures`` calls fail with ``error_type``."""

    def __init__(self, failures: int, error_type: str) -> None:
        super().__init__()
        self.failures = failures
        self.error_type = error_type
        self.calls = 0

    def propose_on_gpu_activity(self):
        @activity.defn(name=names.PROPOSE_BUILTIN_GPU)
        async def propose_on_gpu(inp: BuiltinProposeInput) -> BuiltinProposeResult:
            self.calls += 1
            if self.calls <= self.failures:
                raise ApplicationError("the step's attempt ended", type=self.error_type)
            return BuiltinProposeResult(variants=[], note="proposed after the losses")

        return propose_on_gpu


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
