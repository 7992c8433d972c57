"""The campaign workflow: one problem from compile to a verified, re-stitched model.

A small state machine over named steps (compile -> segment -> triage -> search
-> verify -> report).  Every step's result lives in ``CampaignState`` so a
continue-as-new or a replay resumes after the last finished step; the answer
is never slower than the compiler's, because anything that does not pass the
model-level gates leaves the baseline in place.
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from kernelopt import contracts
    from kernelopt.agents.facts import build_facts
    from kernelopt.compile.segment_scope import scope_segment
    from kernelopt.contracts import names
    from kernelopt.contracts.audit import EXPORT_PATCH
    from kernelopt.contracts.campaign import library_choices_of
    from kernelopt.contracts.search import (
        BUILTIN_EXHAUSTED,
        PromptFacts,
        builtin_family,
        passed_gates_1_2,
    )
    from kernelopt.contracts.search_attributes import (
        SA_BEST,
        SA_CAMPAIGN,
        SA_OUTCOME,
        SA_PHASE,
    )
    from kernelopt.contracts.target_cutoff import select_targets
    from kernelopt.contracts.verdicts import pinned_gates
    from kernelopt.proposer.targets import rewrite_target

    from . import activity_options as opts
    from .export_campaign import start_export
    from .machine_loss import failed_run_seconds, riding_out_losses

FALLBACK_REASON_PATCH = "fallback-names-model-gate"
# A target's best winner that fails the model gates is followed by its runners-up.
MODEL_RUNNERS_UP_PATCH = "model-gates-try-runners-up"
# A stop signal gives up the compile step instead of waiting for it to end.
STOP_DURING_COMPILE_PATCH = "stop-gives-up-compile"
# The built-in proposer's rewrite family gets the whole forward besides the kernel targets.
BUILTIN_REWRITES_PATCH = "builtin-rewrites-whole-forward"
# A kernel search gets only its target's part of the segmentation (compile/segment_scope.py).
SCOPED_SEGMENT_PATCH = "search-gets-scoped-segment"
# A pause or stop that arrived while a search was being started reaches it once it has.
STEER_STARTING_SEARCH_PATCH = "steer-starting-search"
# The segmentation goes to the artifact store; the state and activity inputs carry its
# reference, and activities that read kernels or launches load it (compile/segment_store.py).
SEGMENT_BY_REF_PATCH = "segmentation-by-reference"
# Triage's result goes to the artifact store too; the state carries its reference and the
# searched targets as a stored plan, and activities hand out one target at a time with its
# scoped segmentation and prompt facts (compile/triage_store.py, proposer/plan.py).
TRIAGE_BY_REF_PATCH = "triage-by-reference"
# A by-reference campaign's searches get their target's scope by reference too: target_scope
# stores the scoped segmentation and full facts, the search carries a ScopeRef and bounded
# facts, and its activities load the scope (compile/segment_store.py, activities/scope.py).
SCOPE_BY_REF_PATCH = "scope-by-reference"
NO_BASELINE = "; it came before the compile step finished, so no baseline was built"
# A forward Inductor cannot compile (kernelopt.compile.capture.CaptureError, named here
# because the workflow sandbox does not import torch) ends in an outcome that says so.
UNCOMPILABLE_PATCH = "uncompilable-forward-outcome"
UNCOMPILABLE_ERROR = "CaptureError"
UNCOMPILABLE_REASON_CHARS = 600
# A trial whose re-stitched wrapper fails to build or run (after the activity's retries) is
# a trial not kept, with its error in the outcome's reason; before, it failed the campaign.
RESTITCH_FAILURE_PATCH = "restitch-failure-not-kept"
# A whole-forward win is judged and handed back as the ModelNew it is (``_as_own_model``),
# not as a wrapper that runs it: the form gate 4 times is the one returned, without the
# flat-argument round trip the wrapper adds on every call.
FORWARD_AS_MODEL_PATCH = "forward-win-as-own-model"


def uncompilable_reason(message: str) -> str:
    """The outcome's reason when Inductor cannot compile the forward: the compile step's
    error (its first line, without the traceback the child sent) and what the user gets."""
    first = message.splitlines()[0] if message else ""
    for prefix in (f"{names.COMPILE} failed: ", f"{UNCOMPILABLE_ERROR}: "):
        first = first.removeprefix(prefix)
    if len(first) > UNCOMPILABLE_REASON_CHARS:
        first = first[: UNCOMPILABLE_REASON_CHARS - 3] + "..."
    return (
        f"torch.compile (Inductor) cannot compile this forward, so there is no compiled "
        f"baseline to improve and the model is returned as written: {first}"
    )


def _not_kept(candidate_id: str, gate: contracts.ModelGateResult) -> str:
    """One trial the greedy re-stitch did not keep, with the model gate's own reason."""
    v = gate.verdict
    if v.passed:
        return f"{candidate_id}: passed at {gate.speedup or 0.0:.3f}x, not faster than the baseline"
    return f"{candidate_id}: {v.gate.value} {v.status.value}: {v.reason[:200]}"


def _cancelled(exc: Exception) -> bool:
    return isinstance(exc, ActivityError) and isinstance(exc.cause, CancelledError)


def _failure_text(exc: Exception) -> str:
    """An activity failure's own message, first line, short (the outcome quotes it)."""
    if isinstance(exc.__cause__, ActivityError):  # ``_call``'s non-retryable re-raise
        exc = exc.__cause__
    cause = exc.cause if isinstance(exc, ActivityError) and exc.cause is not None else exc
    text = getattr(cause, "message", "") or str(cause)
    return (text.strip().splitlines() or [type(cause).__name__])[0][:200]


def _as_own_model(trial: list[contracts.Replacement]) -> bool:
    """A trial that is one whole-forward ``ModelNew``: gate 4 times it as that module, beside
    Inductor's wrapper or a kernel problem's own baseline ``ModelNew``
    (``gates.layout.CompiledLayout.baseline_for``)."""
    return len(trial) == 1 and trial[0].target.kind == contracts.TargetKind.FORWARD


def _overlaps(target, accepted: list[contracts.Replacement]) -> bool:
    taken = {k for r in accepted for k in r.target.kernels}
    return any(k in taken for k in target.kernels)


class StopCampaign(Exception):
    """Raised inside the workflow when the user cancels: the baseline is returned."""


@workflow.defn(name=names.OPTIMIZE_MODEL)
class OptimizeModel:
    def __init__(self) -> None:
        self._input: contracts.CampaignInput | None = None
        self._state = contracts.CampaignState()
        self._paused = False
        self._stop_requested = ""
        self._progress = contracts.CampaignProgress(campaign_id="", problem="")
        self._child: workflow.ChildWorkflowHandle | None = None

    # --- queries, signals, updates --------------------------------------------------
    @workflow.query(name="progress")
    def progress(self) -> contracts.CampaignProgress:
        return self._progress

    @workflow.query(name="state")
    def state(self) -> contracts.CampaignState:
        return self._state

    @workflow.signal(name="pause")
    async def pause(self) -> None:
        self._paused = True
        self._progress.paused = True
        self._progress.message = "paused"
        await self._tell_search("pause")

    @workflow.signal(name="resume")
    async def resume(self) -> None:
        self._paused = False
        self._progress.paused = False
        if self._progress.message == "paused":
            self._progress.message = ""
        await self._tell_search("resume")

    @workflow.signal(name="stop")
    async def stop(self, reason: str = "cancelled by user") -> None:
        self._stop_requested = reason or "cancelled by user"
        await self._tell_search("stop", self._stop_requested)

    async def _tell_search(self, signal: str, *args: str) -> None:
        """Pause, resume and cancel reach a running search at once, not after it ends."""
        if self._child is None or not workflow.patched("steer-running-search"):
            return
        try:
            await self._child.signal(signal, *args)
        except ApplicationError as exc:  # it finished meanwhile
            workflow.logger.info("search ended before the %s signal: %s", signal, exc)

    async def _steer_started_search(self) -> None:
        """Tell a search just started about a pause or stop that came while it was starting.

        Until its start resolves there is no handle to signal, so ``_tell_search``
        dropped them, and the whole search would have run through a pause.
        """
        if self._stop_requested:
            await self._tell_search("stop", self._stop_requested)
        elif self._paused:
            await self._tell_search("pause")

    @workflow.update(name="set_budgets")
    async def set_budgets(self, budgets: contracts.Budgets) -> contracts.Budgets:
        self._state.budgets = budgets
        self._progress.budgets = budgets
        if self._child is not None and workflow.patched("budget-signal-to-search"):
            # the running search gets its new allowance at once
            try:
                await self._child.signal(
                    contracts.SEARCH_UPDATE_BUDGET,
                    contracts.SearchBudgetUpdate(budget_left=self._budget_left()),
                )
            except ApplicationError as exc:  # it finished meanwhile: the next one reads state
                workflow.logger.info("search ended before the budget signal: %s", exc)
        return budgets

    @set_budgets.validator
    def _validate_budgets(self, budgets: contracts.Budgets) -> None:
        for name, value in budgets.model_dump().items():
            if value is not None and value < 0:
                raise ValueError(f"budget {name} must be >= 0, got {value}")

    # --- run --------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: contracts.CampaignInput) -> contracts.Outcome:
        self._input = inp
        if inp.state is not None:
            self._state = inp.state
            self._paused = inp.state.paused
            self._stop_requested = inp.state.stop_requested
        else:
            self._state.budgets = inp.options.budgets
            self._state.started_at = workflow.now().isoformat()
        self._progress = contracts.CampaignProgress(
            campaign_id=inp.campaign_id,
            problem=inp.problem.name,
            budgets=self._state.budgets,
            proposer=self._proposer_label(),
        )
        try:
            return await self._run_steps(inp)
        except StopCampaign:
            reason = self._stop_requested or "cancelled"
            if self._state.compiled is None:
                reason += NO_BASELINE
            return await self._finish_with_baseline(inp, reason)

    async def _run_steps(self, inp: contracts.CampaignInput) -> contracts.Outcome:
        state = self._state
        if state.compiled is None:
            await self._enter(contracts.CampaignPhase.COMPILING)
            try:
                state.compiled = await self._compile(inp)
            except ApplicationError as exc:
                if exc.type != UNCOMPILABLE_ERROR or not workflow.patched(UNCOMPILABLE_PATCH):
                    raise
                return await self._finish_with_baseline(inp, uncompilable_reason(exc.message))
        if state.segment is None and state.segment_ref is None:
            await self._enter(contracts.CampaignPhase.SEGMENTING)
            segment_input = contracts.SegmentInput(compiled=state.compiled, mode=inp.options.mode)
            if workflow.patched(SEGMENT_BY_REF_PATCH):
                state.segment_ref = await self._cpu(
                    names.SEGMENT_TO_STORE, segment_input, contracts.SegmentRef, opts.SEGMENT
                )
            else:
                state.segment = await self._cpu(
                    names.SEGMENT, segment_input, contracts.SegmentResult, opts.SEGMENT
                )
        if state.triage is None and state.triage_ref is None:
            await self._enter(contracts.CampaignPhase.TRIAGING)
            triage_input = contracts.TriageInput(
                compiled=state.compiled, gamma=inp.options.gamma, **self._segment_fields()
            )
            if state.segment_ref is not None and workflow.patched(TRIAGE_BY_REF_PATCH):
                state.triage_ref = await self._gpu(
                    names.TRIAGE_TO_STORE, triage_input, contracts.TriageRef, opts.TRIAGE
                )
            else:
                state.triage = await self._gpu(
                    names.TRIAGE, triage_input, contracts.TriageResult, opts.TRIAGE
                )
        skip = self._skip_reason(inp, state.triage or state.triage_ref)
        if skip:
            return await self._finish_with_baseline(inp, skip)
        if state.triage_ref is not None:
            await self._search_planned(inp)
        else:
            await self._search_targets(inp)
        return await self._verify_and_finish(inp)

    # --- search -------------------------------------------------------------------------
    async def _search_targets(self, inp: contracts.CampaignInput) -> None:
        state = self._state
        by_ref = state.segment_ref is not None
        if by_ref and state.targets:
            # chosen by an earlier run of this campaign (before a continue-as-new)
            targets = list(state.targets)
        else:
            targets = await self._choose_targets(inp)
        state.targets = targets
        self._progress.targets_total = len(targets)
        done = {r.target_id for r in state.results}
        self._progress.targets_done = len(done)
        await self._enter(contracts.CampaignPhase.SEARCHING)
        for target in targets:
            if target.id in done:
                continue
            await self._checkpoint()
            if self._budget_exhausted():
                break
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(inp)
            self._progress.current_target = target.id
            if by_ref:
                # the store holds the segmentation: an activity cuts out the target's part
                segment = await self._cpu(
                    names.SCOPE_SEGMENT,
                    contracts.ScopeSegmentInput(segment=state.segment_ref, target=target),
                    contracts.SegmentResult,
                    opts.SEGMENT,
                )
                await self._checkpoint()  # a pause or stop that came meanwhile: before the search
                facts = self._facts_for(inp, target, segment)
            else:
                segment = state.segment
                if workflow.patched(SCOPED_SEGMENT_PATCH):
                    segment = scope_segment(segment, target)
                facts = self._facts_for(inp, target, state.segment)
            await self._search_one(inp, target, segment, facts)
        self._progress.current_target = None

    async def _search_planned(self, inp: contracts.CampaignInput) -> None:
        """The search when triage is stored: the state carries the plan's reference only.

        Targets are searched in plan order, one result each, so the next one is
        ``len(state.results)``; an activity hands it out with its scoped segmentation
        and prompt facts, which need the full triage and segmentation.
        """
        state = self._state
        if state.plan is None:
            builtin = self._builtin_on_module()
            # each choice stays behind the patch that introduced it, as in _choose_targets
            # (the per-kernel targets' share cut-off, always on since this patch, excepted)
            state.plan = await self._cpu(
                names.PLAN_TARGETS,
                contracts.PlanTargetsInput(
                    compiled=state.compiled,
                    segment=state.segment_ref,
                    triage=state.triage_ref,
                    builtin_kernels=builtin and workflow.patched("builtin-single-kernel-targets"),
                    skip_fusion_groups=not self._use_llm()
                    and workflow.patched("builtin-skips-fusion-groups"),
                    max_targets=inp.options.max_targets,
                    rewrites_first=builtin and workflow.patched(BUILTIN_REWRITES_PATCH),
                ),
                contracts.TargetPlan,
                opts.SEGMENT,
            )
        plan = state.plan
        self._progress.targets_total = plan.count
        self._progress.targets_done = len(state.results)
        await self._enter(contracts.CampaignPhase.SEARCHING)
        for index in range(len(state.results), plan.count):
            await self._checkpoint()
            if self._budget_exhausted():
                break
            if workflow.info().is_continue_as_new_suggested():
                await self._continue_as_new(inp)
            scope = await self._cpu(
                names.TARGET_SCOPE,
                contracts.TargetScopeInput(
                    compiled=state.compiled,
                    segment=state.segment_ref,
                    triage=state.triage_ref,
                    plan=plan,
                    index=index,
                    gates=inp.options.gates,
                    by_reference=workflow.patched(SCOPE_BY_REF_PATCH),
                ),
                contracts.TargetScope,
                opts.SEGMENT,
            )
            await self._checkpoint()  # a pause or stop that came meanwhile: before the search
            # named once its search starts: a pause held above is between two targets
            self._progress.current_target = scope.target.id
            await self._search_one(inp, scope.target, scope.segment, scope.facts, scope.scope)
        self._progress.current_target = None

    async def _choose_targets(self, inp: contracts.CampaignInput) -> list[contracts.SearchTarget]:
        """Triage's targets, as the proposer and the options narrow or widen them."""
        state = self._state
        if state.segment_ref is not None:
            # triage keeps at least one target whenever segmentation made any
            targets = list(state.triage.targets)
        else:
            targets = list(state.triage.targets or state.segment.targets)
        builtin: contracts.SegmentTargetsResult | None = None
        if self._builtin_on_forward(targets) and workflow.patched("builtin-single-kernel-targets"):
            builtin = await self._builtin_targets()
            targets = self._kernel_targets(builtin)
        if not self._use_llm() and workflow.patched("builtin-skips-fusion-groups"):
            # fusing kernels takes new code; the built-in proposer only re-tunes one kernel
            targets = [t for t in targets if t.kind != contracts.TargetKind.FUSION_GROUP]
        if inp.options.max_targets is not None:
            targets = targets[: inp.options.max_targets]
        if self._builtin_on_module() and workflow.patched(BUILTIN_REWRITES_PATCH):
            # first: a rewrite's wins are the largest and its search the cheapest (one CPU
            # proposal, a handful of candidates); max_targets bounds the kernel searches
            if state.segment_ref is not None:
                forward = (builtin or await self._builtin_targets()).forward
            else:
                forward = rewrite_target(
                    state.compiled, state.segment, [*state.triage.targets, *state.segment.targets]
                )
            targets = [forward, *(t for t in targets if t.kind != contracts.TargetKind.FORWARD)]
        return targets

    async def _search_one(
        self,
        inp: contracts.CampaignInput,
        target: contracts.SearchTarget,
        segment: contracts.SegmentResult | None,
        facts: PromptFacts | None,
        scope: contracts.ScopeRef | None = None,
    ) -> None:
        """One target's search as a child workflow; its result joins the state."""
        state = self._state
        child_input = contracts.SearchKernelInput(
            campaign_id=inp.campaign_id,
            compiled=state.compiled,
            segment=segment,
            scope=scope,
            target=target,
            params=inp.options.search,
            proposer=inp.options.proposer,
            use_llm=self._use_llm(),
            gpu_queue=inp.options.gpu_queue,
            cpu_queue=inp.options.cpu_queue,
            gpu_heartbeat_s=inp.options.gpu_heartbeat_s,
            gates=inp.options.gates,
            budget_left=self._budget_left(),
            memory=state.memory,
            share_memory=inp.options.share_memory,
            facts=facts,
        )
        try:
            self._child = await workflow.start_child_workflow(
                names.SEARCH_KERNEL,
                child_input,
                id=f"{workflow.info().workflow_id}/search/{target.id}",
                task_queue=inp.options.cpu_queue,
                result_type=contracts.SearchKernelResult,
            )
            if (self._paused or self._stop_requested) and workflow.patched(
                STEER_STARTING_SEARCH_PATCH
            ):
                await self._steer_started_search()
            result = await self._child
        except ChildWorkflowError as exc:
            workflow.logger.warning("search of %s failed: %s", target.id, exc.cause or exc)
            result = contracts.SearchKernelResult(
                target_id=target.id, stopped_reason=f"search failed: {exc.cause or exc}"
            )
        finally:
            self._child = None
        if result.memory is not None:
            state.memory = result.memory
        if result.proposer:
            self._progress.proposer = result.proposer
        # experience lives in the memory artifact; carrying it per target only grows the state
        state.results.append(result.model_copy(update={"experience": []}))
        state.used.add(result.usage, result.gpu_seconds)
        state.candidates_tried += result.candidates_tried
        state.candidates_accepted += (
            result.candidates_accepted  # archived pages included
            if result.candidates_accepted is not None
            else passed_gates_1_2(result.decisions)
        )
        self._progress.targets_done = len(state.results)
        self._sync_progress()

    def _facts_for(
        self,
        inp: contracts.CampaignInput,
        target: contracts.SearchTarget,
        segment: contracts.SegmentResult,
    ) -> PromptFacts | None:
        """The target's prompt facts (pure arithmetic over contracts, so deterministic here).

        ``segment`` may be the target's scoped part: the facts read only the target's
        own kernels (a forward target's are all of them).  They are an aid to the
        agents: a target whose records the arithmetic cannot read is searched
        without them rather than failing the workflow task.
        """
        state = self._state
        try:
            return build_facts(
                state.compiled, segment, target, state.triage, gates=inp.options.gates
            )
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            workflow.logger.warning("no prompt facts for %s: %s", target.id, exc)
            return None

    # --- model-level verification -------------------------------------------------------
    async def _verify_and_finish(self, inp: contracts.CampaignInput) -> contracts.Outcome:
        state = self._state
        winners = [r for r in state.results if r.best is not None and r.best.source is not None]
        if not winners:
            compiled_any = any(r.candidates_compiled for r in state.results)
            category = (
                contracts.OutcomeCategory.FALLBACK
                if compiled_any
                else contracts.OutcomeCategory.SYNTHESIS_FAILURE
            )
            tried = sum(r.candidates_tried for r in state.results)
            passed = state.candidates_accepted
            if passed:
                reason = (
                    f"{tried} candidates tried, {passed} passed gates 1-2 but none was faster "
                    "than the baseline"
                )
            elif compiled_any:
                reason = f"{tried} candidates tried, none passed gates 1-2"
            elif tried:
                reason = f"{tried} candidates tried, none compiled and ran"
            else:
                reason = self._nothing_tried_reason()
            return await self._finish_with_baseline(inp, reason, category=category)

        await self._enter(contracts.CampaignPhase.VERIFYING)
        winners.sort(key=lambda r: -(r.best_kernel_speedup or 0.0))
        if state.plan is not None:
            listed = await self._cpu(
                names.PLAN_LOOKUP,
                contracts.PlanLookupInput(plan=state.plan, ids=[r.target_id for r in winners]),
                contracts.TargetList,
                opts.SEGMENT,
            )
            target_by_id = {t.id: t for t in listed.targets}
        else:
            own = state.segment.targets if state.segment is not None else []
            target_by_id = {t.id: t for t in [*own, *state.triage.targets]}
            target_by_id.update({t.id: t for t in state.targets})
        accepted: list[contracts.Replacement] = []
        kept_labels: list[str] = []  # the built-in labels behind the kept replacements
        best: contracts.ModelGateResult | None = None
        best_wrapper, best_kind = None, "wrapper"
        verdicts = []
        why_not: list[str] = []  # per trial that was not kept, in the user's words
        trials: list[str] = []  # which candidate each model verdict judged
        # Greedy: keep a replacement only if the whole model stays correct and gets faster.
        second_chances = workflow.patched(MODEL_RUNNERS_UP_PATCH)
        for result in winners:
            await self._checkpoint()
            target = target_by_id.get(result.target_id)
            if target is None or _overlaps(target, accepted):
                continue  # a fusion group and its own kernels cannot both be replaced
            choices = [result.best, *(result.runners_up if second_chances else [])]
            for n, choice in enumerate(choices):
                if n:
                    await self._checkpoint()
                trial = [*accepted, contracts.Replacement(target=target, source=choice.source)]
                if _as_own_model(trial) and workflow.patched(FORWARD_AS_MODEL_PATCH):
                    model, source_kind = choice.source, "forward"
                else:
                    try:
                        stitched = await self._gpu(
                            names.RESTITCH,
                            contracts.RestitchInput(
                                compiled=state.compiled,
                                replacements=trial,
                                **self._segment_fields(),
                            ),
                            contracts.RestitchResult,
                            opts.RESTITCH,
                        )
                    except (ActivityError, ApplicationError) as exc:
                        if _cancelled(exc) or not workflow.patched(RESTITCH_FAILURE_PATCH):
                            raise
                        why_not.append(f"{choice.id}: re-stitching failed: {_failure_text(exc)}")
                        continue
                    model, source_kind = stitched.wrapper, "wrapper"
                gate = await self._gpu(
                    names.GATE_MODEL,
                    contracts.ModelGateInput(
                        compiled=state.compiled,
                        wrapper=model,
                        gamma=inp.options.gamma,
                        source_kind=source_kind,
                        **pinned_gates(inp.options.gates),
                    ),
                    contracts.ModelGateResult,
                    opts.GATE_MODEL,
                )
                verdicts.append(gate.verdict)
                if second_chances:
                    trials.append(choice.id)
                better = best is None or (gate.speedup or 0.0) > (best.speedup or 0.0)
                if gate.verdict.passed and (gate.speedup or 0.0) >= 1.0 and better:
                    accepted = trial
                    kept_labels.append(choice.label)
                    best = gate
                    best_wrapper, best_kind = model, source_kind
                    state.best_speedup = gate.speedup
                    self._sync_progress()
                    break  # this target is settled; its runners-up are not needed
                why_not.append(_not_kept(choice.id, gate))

        if best is None:
            reason = (
                "every re-stitched model failed V_model or V_perf; the compiler's baseline stands"
            )
            if workflow.patched(FALLBACK_REASON_PATCH):
                reason = (
                    f"no re-stitched model was kept ({'; '.join(why_not)}); the baseline stands"
                )
            return await self._finish_with_baseline(
                inp,
                reason,
                category=contracts.OutcomeCategory.FALLBACK,
                model_verdicts=verdicts,
                model_trials=trials,
            )
        category = (
            contracts.OutcomeCategory.OPTIMIZED
            if best.category == contracts.PerfCategory.OPTIMIZED
            else contracts.OutcomeCategory.MATCHED
        )
        outcome = self._outcome(
            inp,
            category=category,
            speedup=float(best.speedup or 1.0),
            reason=f"{len(accepted)} replacement(s) verified on the whole model",
            baseline_ms=best.baseline_ms,
            optimized_ms=best.candidate_ms,
            wrapper=best_wrapper,
            source_kind=best_kind,
            replaced=[r.target.id for r in accepted],
            replaced_by=[builtin_family(label) if label else "llm" for label in kept_labels],
            model_verdicts=verdicts,
            model_trials=trials,
            library_choices=library_choices_of(kept_labels),
        )
        return await self._report(outcome)

    # --- endings ---------------------------------------------------------------------------
    async def _finish_with_baseline(
        self,
        inp: contracts.CampaignInput,
        reason: str,
        category: contracts.OutcomeCategory = contracts.OutcomeCategory.FALLBACK,
        model_verdicts: list | None = None,
        model_trials: list[str] | None = None,
    ) -> contracts.Outcome:
        outcome = self._outcome(
            inp,
            category=category,
            speedup=1.0,
            reason=reason,
            optimized_ms=None,
            wrapper=self._state.compiled.wrapper if self._state.compiled else None,
            replaced=[],
            model_verdicts=model_verdicts or [],
            model_trials=model_trials or [],
        )
        return await self._report(outcome)

    async def _report(self, outcome: contracts.Outcome) -> contracts.Outcome:
        await self._enter(contracts.CampaignPhase.REPORTING, allow_stop=False)
        decisions = [d for r in self._state.results for d in r.decisions]
        pages = [p for r in self._state.results for p in r.log_pages]
        try:
            report = await workflow.execute_activity(
                names.WRITE_REPORT,
                contracts.ReportInput(outcome=outcome, decisions=decisions, log_pages=pages),
                task_queue=self._input.options.cpu_queue,
                result_type=contracts.ReportResult,
                **opts.REPORT.kwargs(),
            )
            outcome = outcome.model_copy(update={"report": report.report})
        except ActivityError as exc:
            workflow.logger.warning("report could not be written: %s", exc.cause or exc)
        self._state.phase = contracts.CampaignPhase.DONE
        self._progress.phase = contracts.CampaignPhase.DONE
        self._progress.message = f"{outcome.category.value}: {outcome.reason}"
        self._upsert(SA_OUTCOME, outcome.category.value)
        self._upsert(SA_PHASE, contracts.CampaignPhase.DONE.value)
        if workflow.patched(EXPORT_PATCH):
            # audits must outlive the server's retention: export once this run has closed
            await start_export(self._input.campaign_id, self._input.options.cpu_queue)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return outcome

    def _outcome(self, inp: contracts.CampaignInput, **fields) -> contracts.Outcome:
        state = self._state
        compiled = state.compiled
        state.used.wall_seconds = self._elapsed()
        if "baseline_ms" not in fields:
            # the wrapper's own call time: what gate 4 compares against (no dynamo overhead)
            fields["baseline_ms"] = (
                (compiled.wrapper_ms or compiled.compiled_ms) if compiled else None
            )
        return contracts.Outcome(
            campaign_id=inp.campaign_id,
            problem=inp.problem.name,
            eager_ms=compiled.eager_ms if compiled else None,
            compile_mode=compiled.mode if compiled else inp.options.compile_mode,
            baseline_note=compiled.mode_reason if compiled else "",
            kind=compiled.problem.kind if compiled else inp.problem.kind,
            proposer=self._progress.proposer or self._proposer_label(),
            mode=self._segment_mode(),
            mode_reason=self._segment_mode_reason(),
            triage=state.triage,
            triage_ref=state.triage_ref,
            used=state.used,
            candidates_tried=state.candidates_tried,
            candidates_accepted=state.candidates_accepted,
            torch_version=compiled.torch_version if compiled else "",
            triton_version=compiled.triton_version if compiled else "",
            gpu_name=compiled.gpu_name if compiled else "",
            numerics=compiled.numerics if compiled else "",
            stop_reason=self._stop_reason(),
            kernels_short=state.plan.kernels_short if state.plan is not None else "",
            **fields,
        )

    def _stop_reason(self) -> str:
        if self._state.stop_reason:
            return self._state.stop_reason
        budget_stops = [
            f"{r.target_id}: {r.stopped_reason}"
            for r in self._state.results
            if r.stopped_reason.startswith("budget")
        ]
        return "; ".join(budget_stops)

    def _nothing_tried_reason(self) -> str:
        """Why no candidate came to exist, in the searches' own words."""
        state = self._state
        if state.plan is not None:
            kernel_targets = state.plan.kernel_targets > 0
        else:
            kernel_targets = any(t.kind != contracts.TargetKind.FORWARD for t in state.targets)
        if state.plan is not None and state.plan.kernels_short and not self._use_llm():
            # the model has Triton kernels; the plan left them out (recorded since it does)
            short = state.plan.kernels_short
            return f"no candidate for the whole forward, and no kernel searched: {short}"
        if not kernel_targets and not self._use_llm():
            stops = [
                r.stopped_reason.removeprefix(BUILTIN_EXHAUSTED)
                for r in state.results
                if r.stopped_reason
            ]
            return (
                "no candidate: the built-in proposer re-tunes the compiled forward's Triton "
                "kernels and it has none (library calls only); an LLM proposer can write one"
                + (f"; the forward's search stopped: {stops[0]}" if stops else "")
            )
        why = list(dict.fromkeys(f"{r.target_id}: {r.stopped_reason}" for r in state.results))
        return "no candidate: " + ("; ".join(why) if why else "no target was searched")

    # --- helpers ---------------------------------------------------------------------------
    def _builtin_on_forward(self, targets: list) -> bool:
        """The built-in proposer's kernel families tune one Inductor kernel at a time."""
        return self._builtin_on_module() and any(
            t.kind == contracts.TargetKind.FORWARD for t in targets
        )

    def _builtin_on_module(self) -> bool:
        """The built-in proposer's Inductor families on a problem they apply to (not a kernel
        problem: its forward is its launcher, which the kind's own variants tune)."""
        return self._input.problem.kind.inductor_variants and not self._use_llm()

    async def _builtin_targets(self) -> contracts.SegmentTargetsResult:
        """The per-kernel and forward targets, read from the stored segmentation."""
        state = self._state
        forward = next(
            (t for t in state.triage.targets if t.kind == contracts.TargetKind.FORWARD), None
        )
        return await self._cpu(
            names.SEGMENT_TARGETS,
            contracts.SegmentTargetsInput(
                compiled=state.compiled, segment=state.segment_ref, forward=forward
            ),
            contracts.SegmentTargetsResult,
            opts.SEGMENT,
        )

    def _kernel_targets(
        self, builtin: contracts.SegmentTargetsResult | None
    ) -> list[contracts.SearchTarget]:
        """Each Triton kernel of the wrapper as its own target, largest share first.

        ``builtin`` lists them where the segmentation is stored, not carried.
        """
        state = self._state
        times = {k.name: k.ms for k in state.triage.per_kernel if not k.is_library}
        total = state.triage.total_ms or 1.0
        if builtin is not None:
            targets = [
                t.model_copy(update={"share": times.get(t.id, 0.0) / total})
                for t in builtin.kernels
            ]
        else:
            targets = [
                contracts.SearchTarget(
                    id=k.name,
                    kind=contracts.TargetKind.KERNEL,
                    kernels=[k.name],
                    source=k.source,
                    share=times.get(k.name, 0.0) / total,
                )
                for k in state.segment.kernels
            ]
        targets.sort(key=lambda t: (-t.share, t.id))
        if workflow.patched("builtin-kernel-targets-cutoff"):
            targets = _share_cutoff(targets)
        return targets

    async def _continue_as_new(self, inp: contracts.CampaignInput) -> None:
        """Start a fresh history at a target boundary; everything needed is in the state."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._state.paused = self._paused
        self._state.stop_requested = self._stop_requested
        workflow.continue_as_new(inp.model_copy(update={"state": self._state}))

    def _skip_reason(
        self, inp: contracts.CampaignInput, triage: contracts.TriageResult | contracts.TriageRef
    ) -> str | None:
        state = self._state
        if state.segment is not None:
            segment_targets = len(state.segment.targets)
        else:
            segment_targets = state.segment_ref.targets if state.segment_ref else 0
        searched = (
            triage.searched if isinstance(triage, contracts.TriageRef) else len(triage.targets)
        )
        if not segment_targets and not searched:
            return "the compiled graph has no Triton kernel to search (all library calls)"
        if (
            self._segment_mode() == contracts.SearchMode.MULTI
            and triage.verdict == "library_dominated"
            and not inp.options.search_library_dominated
        ):
            return (
                f"library-dominated: f = {triage.library_fraction:.3f}"
                f" ({triage.verdict_reason or 'Amdahl ceiling below gamma'});"
                " search skipped (--search-library-dominated to search anyway)"
            )
        return None

    def _segment_fields(self) -> dict:
        """The segmentation as an activity input carries it: inline, or by reference."""
        if self._state.segment_ref is not None:
            return {"segment_ref": self._state.segment_ref}
        return {"segment": self._state.segment}

    def _segment_mode(self) -> contracts.SearchMode | None:
        state = self._state
        if state.segment is not None:
            return state.segment.mode
        return state.segment_ref.mode if state.segment_ref is not None else None

    def _segment_mode_reason(self) -> str:
        state = self._state
        if state.segment is not None:
            return state.segment.mode_reason
        return state.segment_ref.mode_reason if state.segment_ref is not None else ""

    def _use_llm(self) -> bool:
        proposer = self._input.options.proposer
        if proposer.kind == contracts.ProposerKind.LLM:
            return True
        if proposer.kind == contracts.ProposerKind.BUILTIN:
            return False
        return bool(proposer.base_url)

    def _proposer_label(self) -> str:
        if self._input is None:
            return ""
        if self._use_llm():
            return f"llm:{self._input.options.proposer.model}"
        return "builtin"

    def _elapsed(self) -> float:
        if not self._state.started_at:
            return 0.0
        from datetime import datetime

        start = datetime.fromisoformat(self._state.started_at)
        return max(0.0, (workflow.now() - start).total_seconds())

    def _budget_left(self) -> dict[str, float | None]:
        b, u = self._state.budgets, self._state.used
        return {
            "tokens": None if b.max_tokens is None else max(0, b.max_tokens - u.tokens),
            "usd": None if b.max_usd is None else max(0.0, b.max_usd - u.usd),
            "gpu_seconds": None
            if b.max_gpu_seconds is None
            else max(0.0, b.max_gpu_seconds - u.gpu_seconds),
            "wall_seconds": None
            if b.max_wall_seconds is None
            else max(0.0, b.max_wall_seconds - self._elapsed()),
        }

    def _budget_exhausted(self) -> bool:
        self._state.used.wall_seconds = self._elapsed()
        name = self._state.used.exceeded(self._state.budgets)
        if name:
            self._state.stop_reason = f"budget {name} exhausted"
            self._progress.message = self._state.stop_reason
            return True
        return False

    async def _checkpoint(self) -> None:
        """Honour pause and stop between steps; never in the middle of one."""
        if self._paused:
            self._progress.message = "paused"
            await workflow.wait_condition(lambda: not self._paused or bool(self._stop_requested))
            self._progress.message = ""
        if self._stop_requested:
            raise StopCampaign()

    async def _enter(self, phase: contracts.CampaignPhase, allow_stop: bool = True) -> None:
        if allow_stop:
            await self._checkpoint()
        self._state.phase = phase
        self._progress.phase = phase
        self._upsert(SA_PHASE, phase.value)

    def _sync_progress(self) -> None:
        s, p = self._state, self._progress
        p.candidates_tried = s.candidates_tried
        p.candidates_accepted = s.candidates_accepted
        p.best_speedup = s.best_speedup
        s.used.wall_seconds = self._elapsed()
        p.used = s.used
        p.budgets = s.budgets
        if s.best_speedup is not None:
            self._upsert(SA_BEST, float(s.best_speedup))

    def _upsert(self, key, value) -> None:
        """Only where the campaign started with our attributes (the server knows them)."""
        if workflow.info().typed_search_attributes.get(SA_CAMPAIGN) is None:
            return
        workflow.upsert_search_attributes([key.value_set(value)])

    async def _compile(self, inp: contracts.CampaignInput) -> contracts.CompileResult:
        """The compile step, given up at once when a stop arrives.

        Every other step ends before a stop is honoured, so the outcome can
        carry what it produced; compile has nothing to keep and may wait hours
        in the queue for a GPU worker, and a user who cancels then expects the
        campaign to end, not to wait for a worker to join.
        """
        step = self._gpu(
            names.COMPILE,
            contracts.CompileInput(problem=inp.problem, mode=inp.options.compile_mode),
            contracts.CompileResult,
            opts.COMPILE,
        )
        if not workflow.patched(STOP_DURING_COMPILE_PATCH):
            return await step
        task = asyncio.ensure_future(step)
        await workflow.wait_condition(lambda: task.done() or bool(self._stop_requested))
        if task.done():
            return task.result()
        task.cancel()  # cancels the activity, queued or running
        with contextlib.suppress(asyncio.CancelledError, ActivityError):
            await task
        raise StopCampaign()

    async def _gpu(self, name: str, arg, result_type, options: opts.CallOptions):
        options = options.with_heartbeat(self._input.options.gpu_heartbeat_s)
        return await self._call(name, arg, result_type, options, self._input.options.gpu_queue)

    async def _cpu(self, name: str, arg, result_type, options: opts.CallOptions):
        return await self._call(name, arg, result_type, options, self._input.options.cpu_queue)

    async def _call(self, name, arg, result_type, options, queue):
        self._progress.waiting_on = queue
        started = workflow.now()
        charged = False
        failure: ActivityError | None = None
        lost: list[float] = []  # GPU time of issues lost with their machines
        try:
            result = await riding_out_losses(
                name,
                lambda: workflow.execute_activity(
                    name, arg, task_queue=queue, result_type=result_type, **options.kwargs()
                ),
                on_loss=lost.append,
            )
            held = getattr(result, "device_seconds", None)
            if held is not None and queue == self._input.options.gpu_queue:
                self._state.used.gpu_seconds += held + sum(lost)  # run time, not time queued
                charged = True
            return result
        except ActivityError as exc:
            failure = exc
            cause = exc.cause
            if isinstance(cause, CancelledError):
                # a step given up by a stop (``_compile``) is charged no GPU time: mostly
                # it never left the queue, and a campaign cancelled after an hour's wait
                # for a worker would otherwise report an hour of GPU time it never had
                charged = True
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                raise ApplicationError(
                    f"{name} failed: {cause.message}", type=cause.type, non_retryable=True
                ) from exc
            raise
        finally:
            self._progress.waiting_on = None
            if queue == self._input.options.gpu_queue and not charged:
                held = failed_run_seconds(failure) if failure is not None else None
                self._state.used.gpu_seconds += (
                    (workflow.now() - started).total_seconds() if held is None else held + sum(lost)
                )
            self._sync_progress()


__all__ = ["OptimizeModel", "StopCampaign"]


def _share_cutoff(ranked: list[contracts.SearchTarget]) -> list[contracts.SearchTarget]:
    """Triage's cut-off for the built-in proposer's per-kernel targets (ranked by share)."""
    shares = {k: t.share for t in ranked for k in t.kernels}
    return select_targets(ranked, shares, 1.0).searched
