"""Deliberately changed copies of the workflows, registered under the real names (tests only).

``test_replay`` replays the recorded histories against these to prove the
replay test can fail: changing which activity a workflow calls at a given
point is non-deterministic and must be caught; the same change behind
``workflow.patched()`` must not be.  Imported inside the workflow sandbox, so
only the standard library, temporalio, the contracts and the workflows.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from kernelopt.contracts import (
        Analysis,
        Bottleneck,
        CampaignInput,
        CampaignPhase,
        KernelProfile,
        Outcome,
        ProfileResult,
        SearchKernelInput,
        SearchKernelResult,
        names,
    )
    from workflows import activity_options as opts

from workflows.optimize_model import OptimizeModel
from workflows.search_kernel import SearchKernel

EXTRA_STEP_PATCH = "audit-test-extra-step"


@workflow.defn(name=names.OPTIMIZE_MODEL)
class TriageBeforeSegment(OptimizeModel):
    """Compile, then triage where the recorded runs segment: activities in another order."""

    @workflow.run
    async def run(self, inp: CampaignInput) -> Outcome:
        return await super().run(inp)

    async def _run_steps(self, inp: CampaignInput) -> Outcome:
        state = self._state
        if state.compiled is None:
            await self._enter(CampaignPhase.COMPILING)
            # the production compile step (with its patch marker), then the wrong order
            state.compiled = await self._compile(inp)
            await self._enter(CampaignPhase.SEGMENTING)
            await self._gpu(
                names.TRIAGE,
                {"compiled": state.compiled.model_dump(mode="json"), "segment": None},
                dict,
                opts.TRIAGE,
            )
        return await super()._run_steps(inp)


class _ExtraStep(OptimizeModel):
    """A new CPU activity at the start of every run."""

    patched = False

    async def _run_steps(self, inp: CampaignInput) -> Outcome:
        if not self.patched or workflow.patched(EXTRA_STEP_PATCH):
            await self._cpu(names.SEGMENT, {"compiled": None}, dict, opts.SEGMENT)
        return await super()._run_steps(inp)


@workflow.defn(name=names.OPTIMIZE_MODEL)
class ExtraStepUnpatched(_ExtraStep):
    @workflow.run
    async def run(self, inp: CampaignInput) -> Outcome:
        return await super().run(inp)


@workflow.defn(name=names.OPTIMIZE_MODEL)
class ExtraStepPatched(_ExtraStep):
    patched = True

    @workflow.run
    async def run(self, inp: CampaignInput) -> Outcome:
        return await super().run(inp)


@workflow.defn(name=names.SEARCH_KERNEL)
class PlanWithoutProfile(SearchKernel):
    """Plans on the root without profiling it first (the recorded LLM searches profile)."""

    @workflow.run
    async def run(self, inp: SearchKernelInput) -> SearchKernelResult:
        return await super().run(inp)

    async def _profile(self, node) -> ProfileResult:
        stub = ProfileResult(
            profile=KernelProfile(source="none", note="variant: not profiled"),
            analysis=Analysis(bottleneck=Bottleneck.UNKNOWN, reasoning="variant"),
        )
        self.state.profiles[node.id] = stub
        return stub


@workflow.defn(name=names.OPTIMIZE_MODEL)
class CompileModeChanged(OptimizeModel):
    """The same activities in the same order, but compile asked for another mode."""

    @workflow.run
    async def run(self, inp: CampaignInput) -> Outcome:
        options = inp.options.model_copy(update={"compile_mode": "reduce-overhead"})
        return await super().run(inp.model_copy(update={"options": options}))
