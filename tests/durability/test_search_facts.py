"""The campaign builds each search's prompt facts inside the production sandbox.

``OptimizeModel`` calls ``build_facts`` in workflow code (pure arithmetic over
contracts, imported pass-through).  A failure there is caught and logged, so a
plain replay would pass even if the facts were never built: this replays the
recorded campaigns through the production sandbox and reads what each
``SearchKernel`` child would be started with.
"""

from __future__ import annotations

import pytest
from temporalio.worker import (
    StartChildWorkflowInput,
    WorkflowOutboundInterceptor,
)

from kernelopt.contracts import names
from kernelopt.contracts.compiled import TargetKind
from kernelopt.contracts.search import SearchKernelInput
from tests.durability.test_replay import corpus, production_workflows
from tests.support.replay import outbound_interceptor, replayer

STARTED: list[SearchKernelInput] = []


class _Outbound(WorkflowOutboundInterceptor):
    def start_child_workflow(self, input: StartChildWorkflowInput):
        if input.workflow == names.SEARCH_KERNEL:
            STARTED.extend(a for a in input.args if isinstance(a, SearchKernelInput))
        return super().start_child_workflow(input)


async def test_every_replayed_search_is_started_with_its_targets_facts() -> None:
    STARTED.clear()
    replaying = replayer(production_workflows(), [outbound_interceptor(_Outbound)])
    for history in corpus(names.OPTIMIZE_MODEL):
        await replaying.replay_workflow(history)
    assert STARTED, "no recorded campaign started a search"
    kinds = set()
    for inp in STARTED:
        facts = inp.facts
        assert facts is not None, inp.target.id
        kinds.add(inp.target.kind)
        gamma = (inp.gates.gamma if inp.gates else None) or 1.03
        assert facts.gamma == pytest.approx(gamma)
        if inp.target.kind == TargetKind.FORWARD:
            times = [k.ms or 0.0 for k in facts.inductor_kernels]
            assert times == sorted(times, reverse=True)  # slowest (dominant) first
        else:
            assert facts.launches, inp.target.id  # the wrapper's launch line(s)
            assert facts.inductor_kernels == []
        if facts.share is not None and facts.required_speedup is not None:
            s = facts.share
            gained = 1 / ((1 - s) + s / facts.required_speedup)
            assert gained == pytest.approx(facts.gamma)  # the Amdahl line adds up
    assert TargetKind.KERNEL in kinds, kinds
    assert any(i.facts.share for i in STARTED)  # triage's share reached some search
