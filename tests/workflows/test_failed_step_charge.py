"""A GPU step that fails is charged the run time it reported, not its wall time.

The wall time since a step was scheduled includes its wait for a worker slot and for the
GPU's lease; on the H100 a compile that waited behind another slot's gates was charged
that wait. ``activities.supervise`` puts the attempt's run time first in the failure's
details, and the workflows charge it (patch ``charge-failed-step-run-time``).
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError

from kernelopt.contracts.verdicts import CandidateGateInput, CandidateGateResult
from tests.workflows.test_search_kernel import Gpu, builtin_round_input, run_search

HELD_S = 0.3  # what each failed gate attempt says it held
AWAY_S = 1.2  # how long each one kept the workflow waiting


class FailingGates(Gpu):
    """Every gate_candidate call works ``AWAY_S`` and fails, saying it held ``HELD_S``."""

    async def gate(self, inp: CandidateGateInput) -> CandidateGateResult:
        await asyncio.sleep(AWAY_S)
        raise ApplicationError("gates child failed", HELD_S, type="ChildError", non_retryable=True)


async def test_a_failed_gate_is_charged_the_run_time_it_reported(env, store):
    gpu = FailingGates()
    result, _ = await run_search(env, builtin_round_input(store, "failcharge"), gpu)
    assert gpu.gated and all(d.deciding_gate == "infrastructure" for d in result.decisions)
    # the screening double's 0.01 s a round, and HELD_S a gate, never AWAY_S
    expected = HELD_S * len(gpu.gated) + 0.01 * len(gpu.screened)
    assert result.gpu_seconds == pytest.approx(expected)
