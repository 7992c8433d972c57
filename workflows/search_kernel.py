"""SearchKernel: the beam search over one target's kernel states (child of OptimizeModel).

One run is a short loop over named steps::

    profile the root -> for each iteration:
        select beam (UCB) -> propose (LLM plans + executor, or built-in variants)
        -> gates 1-3 per candidate, retry-fix on static/correctness/float64 failures
        -> re-time winners -> summarize into memory
    -> result (best by re-timed per-kernel speedup)

With ``SearchParams.screen`` on (the default), a round has two tiers: one
untrusted screening activity ranks all its new candidates, and only those that
could enter the beam (or, in the last round, beat the best) go through the
gates (``workflows.screen_policy``); the others are decisions with their
estimate and no verdict.  In an LLM round a candidate that fails the smoke
check is gated anyway, for the feedback its fix loop needs.  Screening numbers
never become results.

Every choice (beam, bans, winners, budgets, best) comes from
``workflows.search_policy``; this module only sequences activities.  Every
candidate gets a ``Decision`` with its verdicts -- a rejection is data.
Budgets (tokens, dollars, GPU-seconds, wall seconds) are checked before every
activity; when one runs out the search stops cleanly with ``stopped_reason``.
The ``update_budget`` signal changes them while it runs.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from kernelopt.agents import result_text, result_text_v1
    from kernelopt.agents.deferred import LLM_REPLY_SIGNAL
    from kernelopt.agents.plans import dedupe_plans
    from kernelopt.agents.result_text import with_baseline
    from kernelopt.contracts import names
    from kernelopt.contracts.base import ArtifactRef
    from kernelopt.contracts.candidate_id import RETIME_SUFFIX, CandidateId
    from kernelopt.contracts.compiled import SearchStepInput, TargetKind
    from kernelopt.contracts.screening import (
        SCREENED_OUT,
        ScreenCandidate,
        ScreeningEstimate,
        ScreenInput,
        ScreenResult,
    )
    from kernelopt.contracts.search import (
        BUDGET_KEYS,
        BUILTIN_EXHAUSTED,
        SEARCH_PROGRESS,
        SEARCH_UPDATE_BUDGET,
        Analysis,
        Bottleneck,
        BuiltinProposeInput,
        BuiltinProposeResult,
        BuiltinVariant,
        Candidate,
        Decision,
        ExecuteInput,
        ExecuteResult,
        KernelProfile,
        LedgerEntry,
        Plan,
        PlanInput,
        PlanResult,
        ProfileInput,
        ProfileResult,
        PromptFacts,
        SearchBudgetUpdate,
        SearchKernelInput,
        SearchKernelResult,
        SearchLogPage,
        SearchProgress,
        SearchState,
        SummarizeInput,
        SummarizeResult,
        Usage,
        passed_gates_1_2,
    )
    from kernelopt.contracts.verdicts import (
        CandidateGateInput,
        CandidateGateResult,
        GateName,
        GateSettings,
        GateVerdict,
        pinned_gates,
    )

    from . import activity_options as opts
    from . import search_log
    from .deferred_llm import DeferredLLM
    from .machine_loss import CHARGE_PATCH, failed_run_seconds, riding_out_losses
    from .screen_policy import select_for_cascade
    from .search_policy import (
        ROOT_ID,
        BeamUCB,
        Node,
        SearchTree,
        Spend,
        budget_exhausted,
        meltdown_bans,
        remaining,
        should_retry_fix,
    )

BUILTIN_LABEL = (
    "builtin (no LLM): expert templates, algebraic rewrites and launch-configuration search"
)
STORED_FEEDBACK_CHARS = 600  # decisions keep a trimmed copy; the gate's log has the rest
# Decisions (~1.3 KB) and ledger entries (~0.5 KB) move to the artifact store in pages of
# about this many items: the carried state and the result stay far below Temporal's 2 MB
# payload limit however long the search runs.
ARCHIVE_PAGE_ITEMS = search_log.PAGE_ITEMS
ARCHIVE_PATCH = "archive-search-log"
# A gate_candidate activity holds the GPU for all of its run time (reference, per-kernel
# timing, imports), not only the gate children's wall time its verdicts report, which
# was a fraction of it.  Budgets charge the wrapper-measured run time once this marker
# is in the history.
CHARGE_HELD_PATCH = "charge-gate-run-time"
# The tree (and each node's candidate, source and profile) is carried too: past
# 2 x TREE_KEEP states it is pruned to the states the next beams can come from.
TREE_KEEP = 64
PRUNE_PATCH = "prune-search-tree"
DIRECTIONS_KEPT = 64  # plan directions carried (the meltdown detector reads the last few)
# The result also names the next winners after the best, for the model gates' second chances.
RUNNERS_UP = 2
RUNNERS_UP_PATCH = "search-runners-up"
# After the last round only candidates faster than the root are re-timed (no beam follows).
RETIME_LAST_PATCH = "retime-last-round-winners-only"
# Pages are cut by size as well as count (``search_log.cut_pages``), also when one
# iteration's log alone is large, and what is left is archived when the search ends: its
# result then carries page digests only, so the campaign's state and report input stay
# small however many targets it searches.
BOUNDED_PAGES_PATCH = "archive-pages-bounded"
# Experience entries carried (the campaign memory artifact keeps every one).
EXPERIENCE_KEPT = 32
# More pages than this are folded into one index page (same patch): the carried state and
# the result name a few pages however long the search.
PAGES_INLINE = 8
# Digests of pruned states kept for duplicate detection: the newest this many.  An older
# duplicate is gated again (one GPU gate, same decision) instead of carried forever.
PRUNED_SOURCES_KEPT = 1024
# With it, the tree keeps 32 states by speedup and 32 by UCB (64 before): each kept state
# carries its candidate, source and profile (~2.5 KB), and a beam takes 4 per round.
TREE_KEEP_BOUNDED = 32
PRUNED_CAP_PATCH = "bounded-search-tree"
# A planner reply that does not parse is answered once more, in the same conversation.
PLAN_RETRY_PATCH = "planner-parse-retry"
# A plan that repeats one of this state's lineage or of this round is not developed.
DEDUPE_PATCH = "dedupe-plans"
# The planner may propose nothing, with a reason; when every state of a round's beam is
# declined so, the search ends instead of asking again each round.
DECLINE_PATCH = "planner-may-decline"
TRIED_PLANS_KEPT = 16  # plans of a lineage the planner is shown (and repeats are checked against)
# Per state, this many plans are carried, descriptions cut to PLAN_CHARS: at most ~64 states
# x 8 x ~0.35 KB in the carried state, far below the 2 MB payload limit.
PLANS_PER_STATE = 8
PLAN_CHARS = 300
# An accepted candidate slower than gamma is told its timing once, for one more attempt.
TIMING_RETRY_PATCH = "retry-after-timing"
# gate_candidate runs gate 3 (float64) on every candidate that passes gate 2: a small
# systematic error is rejected and goes back to the executor inside the search, instead
# of failing the model gates after it.  Re-timing a winner does not repeat it.
GATE3_PATCH = "gate3-in-search"
# Two tiers (``SearchParams.screen``): a built-in round's candidates are screened in one
# untrusted child, and only those that could change the beam or the outcome
# (``workflows.screen_policy``) go through gate_candidate.  On unless the setting says off.
SCREEN_PATCH = "two-tier-screening"
# A CUDA campaign's whole-forward proposals (Inductor regeneration compiles and autotunes)
# run in the GPU worker, taking turns with the gates instead of overlapping their timing.
BUILTIN_FORWARD_ON_GPU_PATCH = "builtin-forward-on-gpu"
# The same for an LLM round's first attempts, with the fix loop intact: only a candidate
# correct on the smoke input and judged unable to change the beam is kept out.
SCREEN_LLM_PATCH = "two-tier-screening-llm"
# The agents' feedback names what gate 4 timed (the whole forward), its noise and the
# siblings' results with their plans; a state that could not be profiled shows the
# baseline's profile.  Histories from before replay with ``result_text_v1``.
FEEDBACK_PATCH = "labelled-agent-feedback"
# The timing feedback prints gamma with the speedup's 3 decimals ("1.028x ... below the
# 1.030x needed"), not as "1.03x ... below the 1.03x"; asked only where that text is made.
RATIO_DIGITS_PATCH = "timing-feedback-three-decimals"
DEFERRED_MODES = ("batch", "folder")  # replies arrive out of band (workflows.deferred_llm)


def _cause(exc: BaseException) -> str:
    inner = getattr(exc, "cause", None)
    return str(inner or exc)


def _compact(verdicts: list[GateVerdict]) -> list[GateVerdict]:
    """Verdicts as stored in decisions: feedback trimmed so payloads stay small."""
    return [
        v.model_copy(update={"feedback": v.feedback[:STORED_FEEDBACK_CHARS]})
        if len(v.feedback) > STORED_FEEDBACK_CHARS
        else v
        for v in verdicts
    ]


@workflow.defn(name=names.SEARCH_KERNEL)
class SearchKernel:
    @workflow.init
    def __init__(self, inp: SearchKernelInput) -> None:
        self.inp = inp
        if inp.state:
            self.state = SearchState.model_validate(inp.state)
        else:
            self.state = SearchState(budget_left=dict(inp.budget_left), memory=inp.memory)
        self.tree = SearchTree.from_dict(self.state.tree) if self.state.tree else None
        self.step = "starting"
        self.paused = False
        self.notes: list[str] = []  # the built-in proposer's notes of the current round
        # a gated candidate's screening estimate until its decision takes it (same round)
        self.screened: dict[str, ScreeningEstimate] = {}
        # states whose planner proposed nothing on purpose this round, with its reason
        self.declined: dict[str, str] = {}
        self.run_started = workflow.now()
        p = inp.proposer
        self.proposer = (
            f"llm:{p.model} @ {p.base_url or 'https://api.openai.com/v1'}"
            if inp.use_llm
            else BUILTIN_LABEL
        )
        self.deferred = (
            DeferredLLM(self, p, inp.cpu_queue)
            if inp.use_llm and p.mode in DEFERRED_MODES
            else None
        )

    # --- the state machine ----------------------------------------------------------------
    @workflow.run
    async def run(self, inp: SearchKernelInput) -> SearchKernelResult:
        if inp.target.source is None:
            self.state.stopped_reason = "the target has no source to start from"
            return self._result()
        if self.tree is None:
            self.tree = SearchTree.with_root(inp.target.source.sha256)
            self.state.sources[ROOT_ID] = inp.target.source
        # The built-in proposer does not read profiles: spare the GPU the ncu run.
        needs_profile = self.inp.use_llm or not workflow.patched("profile-root-llm-only")
        if ROOT_ID not in self.state.profiles and needs_profile:
            await self._profile(self.tree.root)
        while self.state.iteration < inp.params.iterations and not self._exhausted():
            if self.paused:  # the campaign was paused: hold at this iteration boundary
                self.step = "paused"
                await workflow.wait_condition(lambda: not self.paused or self._exhausted())
                continue
            beam = BeamUCB(inp.params.beam, inp.params.ucb_c).select(self.tree)
            self.step = f"iteration {self.state.iteration}: proposing for {len(beam)} states"
            if inp.use_llm:
                decisions = await self._llm_round(beam)
            else:
                decisions = await self._builtin_round(beam)
            decisions += await self._retime_winners()
            if self._exhausted():
                break  # an interrupted iteration is not counted (nor summarised)
            await self._summarize(decisions)
            self.state.iteration += 1
            await self._archive_if_long()
            self._prune_if_large()
            if (
                workflow.info().is_continue_as_new_suggested()
                and self.state.iteration < inp.params.iterations
            ):
                workflow.continue_as_new(self._carry())
        if not self.state.stopped_reason:
            self.state.stopped_reason = f"completed {self.state.iteration} iterations"
        await self._archive_if_long(final=True)
        return self._result()

    @workflow.signal(name=SEARCH_UPDATE_BUDGET)
    def update_budget(self, update: SearchBudgetUpdate) -> None:
        for key, value in update.budget_left.items():
            if key in BUDGET_KEYS:
                self.state.budget_left[key] = value
        if self.state.stopped_reason.startswith("budget exhausted") and not budget_exhausted(
            self._spend(), self.state.budget_left
        ):
            self.state.stopped_reason = ""  # more budget: the loop goes on at its next check

    @workflow.signal(name="stop")
    def stop(self, reason: str = "cancelled by user") -> None:
        """The campaign was cancelled: wind down before the next activity, keep what we have."""
        if not self.state.stopped_reason:
            self.state.stopped_reason = f"stopped: {reason}"

    @workflow.signal(name=LLM_REPLY_SIGNAL)
    def llm_reply(self, request_id: str = "") -> None:
        """A reply was delivered (``kernelopt reply``): look for it now."""
        if self.deferred is not None:
            self.deferred.wake_up()

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self.paused = True

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self.paused = False

    @workflow.query(name=SEARCH_PROGRESS)
    def progress(self) -> SearchProgress:
        best = self.tree.best() if self.tree else None
        return SearchProgress(
            target_id=self.inp.target.id,
            proposer=self.proposer,
            iteration=self.state.iteration,
            iterations=self.inp.params.iterations,
            candidates_tried=self.state.candidates_tried,
            candidates_accepted=self._accepted(),
            best_kernel_speedup=best.speedup if best else None,
            usage=self.state.usage,
            gpu_seconds=self.state.gpu_seconds,
            budget_left=remaining(self._spend(), self.state.budget_left),
            stopped_reason=self.state.stopped_reason,
            step=self.step,
        )

    # --- budgets --------------------------------------------------------------------------
    def _spend(self) -> Spend:
        wall = self.state.wall_seconds + (workflow.now() - self.run_started).total_seconds()
        return Spend(
            tokens=self.state.usage.total_tokens,
            usd=self.state.usage.usd,
            gpu_seconds=self.state.gpu_seconds,
            wall_seconds=wall,
        )

    def should_stop(self) -> str:
        """Why the search is ending ("" while it goes on): the deferred waits check it."""
        return self.state.stopped_reason if self._exhausted() else ""

    def end_search(self, reason: str) -> None:
        if not self.state.stopped_reason:
            self.state.stopped_reason = reason

    def _exhausted(self) -> bool:
        if self.state.stopped_reason:
            return True
        key = budget_exhausted(self._spend(), self.state.budget_left)
        if key:
            self.state.stopped_reason = f"budget exhausted: {key}"
        return key is not None

    def _held(self, started: datetime, measured: float | None = None) -> float:
        """GPU seconds to charge for an activity: how long its wrapper measured it held the
        GPU, else (a failed call, or a history from before the measure) the wall time since
        ``started``."""
        return measured if measured is not None else (workflow.now() - started).total_seconds()

    # --- step inputs and GPU calls --------------------------------------------------------
    def _step_fields(self) -> dict[str, Any]:
        """What every step's input opens with (``SearchStepInput``): this search's own."""
        return {name: getattr(self.inp, name) for name in SearchStepInput.model_fields}

    async def _on_gpu(
        self,
        activity: str,
        inp: Any,
        result_type: type,
        options: opts.CallOptions,
        *,
        wall_if_silent: bool = False,
    ) -> Any:
        """``activity`` on the GPU queue, under the campaign's GPU heartbeat timeout.

        Issues lost with their machines are charged here once the step succeeds. A step
        that fails is charged here the run time it reported, losses included; one that
        reported none (a history from before) its wall time with ``wall_if_silent`` (the
        gates' and screening's older rule), else nothing (the profile's).
        """
        started = workflow.now()
        lost: list[float] = []
        try:
            result = await riding_out_losses(
                activity,
                lambda: workflow.execute_activity(
                    activity,
                    inp,
                    result_type=result_type,
                    task_queue=self.inp.gpu_queue,
                    **options.with_heartbeat(self.inp.gpu_heartbeat_s).kwargs(),
                ),
                on_loss=lost.append,
            )
        except ActivityError as exc:
            held = failed_run_seconds(exc)
            if held is not None:
                self.state.gpu_seconds += held + sum(lost)
            elif wall_if_silent:
                self.state.gpu_seconds += self._held(started)
            raise
        self.state.gpu_seconds += sum(lost)
        return result

    # --- profiling ------------------------------------------------------------------------
    async def _profile(self, node: Node) -> ProfileResult:
        if node.id in self.state.profiles:
            return self.state.profiles[node.id]
        self.step = f"profiling {node.id}"
        inp = ProfileInput(
            **self._step_fields(),
            source=self.state.sources[node.id],
            harness=self.inp.harness if node.id == ROOT_ID else None,
            state_id=node.id,
            kernel_times=self._kernel_times(),
        )
        try:
            result = await self._on_gpu(names.PROFILE, inp, ProfileResult, opts.PROFILE)
        except ActivityError as exc:  # diagnostics never fail a search
            note = f"profile failed: {_cause(exc)}"[:400]
            result = ProfileResult(
                profile=KernelProfile(source="none", note=note),
                analysis=Analysis(bottleneck=Bottleneck.UNKNOWN, reasoning=note),
            )
        # what the activity wrapper measured, else (older histories) the profiler's own clock
        held = result.device_seconds
        self.state.gpu_seconds += held if held is not None else result.gpu_seconds
        self.state.profiles[node.id] = result
        return result

    # --- LLM rounds -----------------------------------------------------------------------
    async def _llm_round(self, beam: list[Node]) -> list[Decision]:
        p = self.inp.params
        banned = meltdown_bans(self.state.directions, p.meltdown_window, p.meltdown_distinct)
        self.declined = {}
        planned = await asyncio.gather(*(self._plan(node, banned) for node in beam))
        if beam and all(node.id in self.declined for node in beam):
            self.end_search(f"the planner proposed no plan: {self.declined[beam[0].id]}"[:500])
            return []
        jobs: list[tuple[Node, int, int, Plan]] = []
        this_round: list[Plan] = []
        for k, (node, plans) in enumerate(zip(beam, planned, strict=True)):
            keep = self._new_plans(node, plans, this_round)
            kept = {id(p) for p in keep}  # by identity: two equal plans are one kept, one dropped
            for j, plan in enumerate(plans):
                self.state.directions.append(plan.direction)
                if id(plan) in kept:  # j stays the planner's position: a dropped plan leaves a gap
                    jobs.append((node, k, j, plan))
            this_round.extend(keep)
            self._remember_plans(node.id, keep)
        screen = self.inp.params.screen
        if screen.enabled and len(jobs) > 1 and workflow.patched(SCREEN_LLM_PATCH):
            outcomes = await self._screened_llm_round(jobs)
        else:
            outcomes = await asyncio.gather(*(self._pursue_plan(*job) for job in jobs))
        return [d for decisions in outcomes for d in decisions]

    async def _screened_llm_round(
        self, jobs: list[tuple[Node, int, int, Plan]]
    ) -> list[list[Decision]]:
        """Every plan's first reply, one screening of the new sources, then each plan's loop.

        A candidate the policy keeps out of the cascade ends its plan with a
        screened-out decision whose reason tells the agent why; every other
        reply, smoke failures included, is gated and keeps its fix loop.
        """
        firsts = await asyncio.gather(*(self._execute(*job) for job in jobs))
        fresh = [
            ScreenCandidate(candidate_id=self._candidate_id(k, j, 0), source=reply.source)
            for (_, k, j, _), (_, reply) in zip(jobs, firsts, strict=True)
            if reply is not None
            and reply.source is not None
            and not self.tree.has_source(reply.source.sha256)
        ]
        by_id: dict[str, ScreeningEstimate] = {}
        estimates = await self._screen(fresh) if len(fresh) > 1 else None
        if estimates is not None:
            members = [n.speedup for n in self.tree.eligible()]
            last = self.state.iteration + 1 >= self.inp.params.iterations
            judged = select_for_cascade(
                estimates,
                members,
                self.inp.params.beam,
                self.inp.params.screen,
                last_round=last,
                llm_round=True,
            )
            by_id = {e.candidate_id: e for e in judged}
        loops = [
            self._pursue_plan(node, k, j, plan, first, by_id.get(self._candidate_id(k, j, 0)))
            for (node, k, j, plan), first in zip(jobs, firsts, strict=True)
        ]
        return list(await asyncio.gather(*loops))

    def _new_plans(self, node: Node, plans: list[Plan], this_round: list[Plan]) -> list[Plan]:
        """The plans worth code: repeats of the state's lineage or of this round are dropped."""
        if not plans or not workflow.patched(DEDUPE_PATCH):
            return plans
        kept, dropped = dedupe_plans(plans, [*self._lineage_plans(node), *this_round])
        if dropped:
            workflow.logger.info(
                "plans dropped as repeats on %s: %s", node.id, [p.direction for p in dropped]
            )
        return kept

    def _lineage_plans(self, node: Node) -> list[Plan]:
        """Plans developed from this state and its ancestors: each is in the state or failed.

        A plan tried on another branch is not here: applied to this state it is a new
        combination.
        """
        plans: list[Plan] = []
        current: str | None = node.id
        while current is not None:
            plans.extend(self.state.tried_plans.get(current, []))
            parent = self.tree.nodes.get(current)
            current = parent.parent_id if parent is not None else None
        return plans[-TRIED_PLANS_KEPT:] if len(plans) > TRIED_PLANS_KEPT else plans

    def _remember_plans(self, node_id: str, plans: list[Plan]) -> None:
        if plans:
            cut = [p.model_copy(update={"description": p.description[:PLAN_CHARS]}) for p in plans]
            tried = [*self.state.tried_plans.get(node_id, []), *cut]
            self.state.tried_plans[node_id] = tried[-PLANS_PER_STATE:]

    def _facts(self) -> PromptFacts | None:
        """The campaign's prompt facts, with the GPU worker's hardware once the root is profiled."""
        facts = self.inp.facts
        root = self.state.profiles.get(ROOT_ID)
        if facts is None or facts.hardware is not None or root is None or root.hardware is None:
            return facts
        return facts.model_copy(update={"hardware": root.hardware})

    def _kernel_times(self) -> dict[str, float]:
        """GPU ms per forward of Inductor's kernels: the profiler picks the dominant one."""
        if self.inp.facts is None:
            return {}
        return {k.name: k.ms for k in self.inp.facts.inductor_kernels if k.ms}

    def _gamma(self) -> float:
        if self.inp.facts is not None:
            return self.inp.facts.gamma
        return (self.inp.gates or GateSettings()).gamma

    async def _plan(self, node: Node, banned: list[str]) -> list[Plan]:
        if self._exhausted():
            return []
        profile = self.state.profiles.get(node.id)
        if profile is None and self.inp.profile_children:
            profile = await self._profile(node)
        inp = PlanInput(
            target=self.inp.target,
            state_source=self.state.sources[node.id],
            profile=self._shown_profile(profile or self.state.profiles.get(ROOT_ID)),
            banned_directions=banned,
            plans=self.inp.params.plans,
            proposer=self.inp.proposer,
            campaign_id=self.inp.campaign_id,
            memory=self.state.memory,
            memory_tags=self._tags(),
            share_memory=self.inp.share_memory,
            state_id=node.id,
            state_speedup=node.speedup,
            iteration=self.state.iteration,
            facts=self._facts(),
            tried_plans=self._lineage_plans(node),
        )
        result = await self._llm(names.PLAN, inp, PlanResult)
        if result is None:
            return []
        call_id = f"{node.id}/i{self.state.iteration}/plan"
        self._ledger("planner", call_id, result.usage, result.prompt, result.reply)
        if result.declined and workflow.patched(DECLINE_PATCH):
            self.declined[node.id] = result.declined
            return []
        if (
            result.error
            and not result.plans
            and result.reply is not None
            and workflow.patched(PLAN_RETRY_PATCH)
            and not self._exhausted()
        ):
            retry = inp.model_copy(
                update={"parse_retry": result.reply, "parse_error": result.error}
            )
            result = await self._llm(names.PLAN, retry, PlanResult)
            if result is None:
                return []
            self._ledger("planner", f"{call_id}/retry", result.usage, result.prompt, result.reply)
        return result.plans

    def _candidate_id(self, state_index: int, plan_index: int, attempt: int) -> str:
        return str(
            CandidateId(
                target=self.inp.target.id,
                iteration=self.state.iteration,
                state=state_index,
                plan=plan_index,
                attempt=attempt,
            )
        )

    async def _execute(
        self, node: Node, state_index: int, plan_index: int, plan: Plan
    ) -> tuple[ExecuteInput, ExecuteResult | None]:
        """The executor's first reply to one plan (None: no budget, or the endpoint failed)."""
        inp = ExecuteInput(
            target=self.inp.target,
            state_source=self.state.sources[node.id],
            plan=plan,
            proposer=self.inp.proposer,
            campaign_id=self.inp.campaign_id,
            candidate_id=self._candidate_id(state_index, plan_index, 0),
            profile=self._shown_profile(self.state.profiles.get(node.id)),
            facts=self._facts(),
            memory=self.state.memory,
            memory_tags=self._tags(),
            siblings=self._siblings(node, plan),
        )
        reply = (
            await self._llm(names.EXECUTE, inp, ExecuteResult) if not self._exhausted() else None
        )
        return inp, reply

    @staticmethod
    def _texts() -> Any:
        """The result texts this run's history was written with (``FEEDBACK_PATCH``)."""
        return result_text if workflow.patched(FEEDBACK_PATCH) else result_text_v1

    def _timing_feedback(self, decision: Decision) -> str:
        """The timing retry's text, gamma in 3 decimals since ``RATIO_DIGITS_PATCH``."""
        texts = self._texts()
        if texts is result_text and workflow.patched(RATIO_DIGITS_PATCH):
            return result_text.timing_feedback(decision, self._gamma(), digits=3)
        return str(texts.timing_feedback(decision, self._gamma()))

    def _shown_profile(self, profile: ProfileResult | None) -> ProfileResult | None:
        """A state's profile for a prompt, with the baseline's beside it when it has none."""
        if not workflow.patched(FEEDBACK_PATCH):
            return profile
        return with_baseline(profile, self.state.profiles.get(ROOT_ID))

    def _siblings(self, node: Node, plan: Plan) -> list[str]:
        """The outcomes known so far of the other plans on this state (``sibling_lines``)."""
        return self._texts().sibling_lines(
            [d for d in self.state.decisions if d.candidate.parent_id == node.id],
            plan.direction,
        )

    async def _pursue_plan(
        self,
        node: Node,
        state_index: int,
        plan_index: int,
        plan: Plan,
        first: tuple[ExecuteInput, ExecuteResult | None] | None = None,
        screened: ScreeningEstimate | None = None,
    ) -> list[Decision]:
        """One plan: execute, gate, and retry-fix in the same conversation up to K times.

        A candidate that passes but is slower than gamma is told its timing once
        (``timing_feedback``) and gets one more attempt, if attempts remain.  With
        ``first`` the executor already replied (a screened round); a ``screened``
        estimate the policy did not select keeps that reply out of the cascade.
        """

        def cid(attempt: int) -> str:
            return self._candidate_id(state_index, plan_index, attempt)

        inp, reply = (
            first if first is not None else await self._execute(node, state_index, plan_index, plan)
        )
        if screened is not None and screened.selected:
            self.screened[cid(0)] = screened  # its decision carries the estimate
            screened = None
        decisions: list[Decision] = []
        attempt = 0
        timed = False  # the one retry after timing was spent
        while reply is not None:
            self._ledger(
                "executor" if attempt == 0 else "retry_fix",
                cid(attempt),
                reply.usage,
                None,
                reply.conversation,
            )
            cand = Candidate(
                id=cid(attempt),
                target_id=self.inp.target.id,
                parent_id=node.id,
                iteration=self.state.iteration,
                source=reply.source,
                plan=plan,
                proposer=self.proposer,
                attempt=attempt,
                conversation=reply.conversation,
                parent_speedup=node.speedup if node.id != ROOT_ID else None,
            )
            if screened is not None and attempt == 0:
                decisions.append(self._screened_out_llm(cand, screened))
                break
            decision, verdicts = await self._evaluate(node, cand, reply.error)
            decisions.append(decision)
            timing = ""
            if decision.accepted:
                if timed or not self._too_slow(decision, attempt):
                    break
                timed = True
                timing = self._timing_feedback(decision)
            elif (
                not should_retry_fix(decision.deciding_gate, attempt, self.inp.params.retries)
                or self._exhausted()
            ):
                break
            attempt += 1
            fix = inp.model_copy(
                update={
                    "conversation": reply.conversation,
                    "verdicts": [] if timing else verdicts,
                    "feedback": "" if timing else reply.error,
                    "timing": timing,
                    "attempt": attempt,
                    "candidate_id": cid(attempt),
                    # what the other plans on this state measured since the first reply
                    **(
                        {"siblings": self._siblings(node, plan)}
                        if workflow.patched(FEEDBACK_PATCH)
                        else {}
                    ),
                }
            )
            reply = await self._llm(names.RETRY_FIX, fix, ExecuteResult)
        if not any(d.accepted for d in decisions):
            self.tree.record_rejection(node.id)
        return decisions

    def _screened_out_llm(self, cand: Candidate, estimate: ScreeningEstimate) -> Decision:
        """Kept out of the cascade: the reason the agent's later rounds read says why."""
        self.state.candidates_tried += 1
        why = "screened out as slower by an untrusted estimate (not gated, no verdict)"
        reason = f"{why}: {estimate.why}"
        return self._decide(cand, SCREENED_OUT, reason[:500], [], screening=estimate)

    def _too_slow(self, decision: Decision, attempt: int) -> bool:
        """Passed the checks, timed below gamma, attempts left: worth one retry after timing."""
        return (
            decision.speedup is not None
            and decision.speedup < self._gamma()
            and attempt < self.inp.params.retries
            and not self._exhausted()
            and workflow.patched(TIMING_RETRY_PATCH)
        )

    async def _llm(self, activity: str, inp: Any, result_type: type) -> Any:
        """An LLM activity; after Temporal's retries, a failing endpoint stops the search cleanly."""
        if self.deferred is not None:
            self.step = f"iteration {self.state.iteration}: waiting for LLM replies"
            ids = (self.inp.campaign_id, self.inp.target.id, self.state.iteration)
            return await self.deferred.call(activity, inp, result_type, ids)
        try:
            return await workflow.execute_activity(
                activity,
                inp,
                result_type=result_type,
                task_queue=self.inp.cpu_queue,
                **opts.LLM.kwargs(),
            )
        except ActivityError as exc:
            if not self.state.stopped_reason:
                self.state.stopped_reason = f"LLM {activity} failed: {_cause(exc)}"[:500]
            return None

    # --- built-in rounds ------------------------------------------------------------------
    async def _builtin_round(self, beam: list[Node]) -> list[Decision]:
        self.notes = []
        proposals = await asyncio.gather(*(self._propose(node) for node in beam))
        picks: list[tuple[Node, Candidate]] = []
        for k, (node, variants) in enumerate(zip(beam, proposals, strict=True)):
            for v, variant in enumerate(variants):
                if variant.label in self.state.tried_labels:
                    continue  # two states proposed the same config this round
                self.state.tried_labels.append(variant.label)
                picks.append((node, self._variant_candidate(node, k, v, variant)))
        if not picks and not self.state.stopped_reason:
            note = next((n for n in self.notes if n), "launch space exhausted")
            self.state.stopped_reason = f"{BUILTIN_EXHAUSTED}{note}"[:500]
        screen = self.inp.params.screen
        if screen.enabled and len(picks) > 1 and workflow.patched(SCREEN_PATCH):
            return await self._screened_round(picks)
        return list(await asyncio.gather(*(self._try_variant(n, c) for n, c in picks)))

    async def _propose(self, node: Node) -> list[BuiltinVariant]:
        if self._exhausted():
            return []
        inp = BuiltinProposeInput(
            **self._step_fields(),
            state_source=self.state.sources[node.id],
            count=self.inp.params.plans,
            exclude=list(self.state.tried_labels),
            iteration=self.state.iteration,
        )
        if self.state.memory is not None and workflow.patched("builtin-reads-memory"):
            inp = inp.model_copy(update={"memory": self.state.memory, "memory_tags": self._tags()})
        name, queue, call = names.PROPOSE_BUILTIN, self.inp.cpu_queue, opts.BUILTIN.kwargs()
        on_cuda = (self.inp.gates or GateSettings()).device.startswith("cuda")
        if (
            on_cuda
            and self.inp.target.kind == TargetKind.FORWARD
            and workflow.patched(BUILTIN_FORWARD_ON_GPU_PATCH)
        ):
            name, queue = names.PROPOSE_BUILTIN_GPU, self.inp.gpu_queue
            call = opts.BUILTIN_GPU.with_heartbeat(self.inp.gpu_heartbeat_s).kwargs()
        lost: list[float] = []
        try:
            result = await riding_out_losses(
                name,
                lambda: workflow.execute_activity(
                    name, inp, result_type=BuiltinProposeResult, task_queue=queue, **call
                ),
                on_loss=lost.append,
            )
        except ActivityError as exc:
            if queue == self.inp.gpu_queue:
                self.state.gpu_seconds += (failed_run_seconds(exc) or 0.0) + sum(lost)
            workflow.logger.warning("built-in proposer failed on %s: %s", node.id, _cause(exc))
            return []
        # its whole-model compiles hold the GPU worker (None: the CPU queue's proposer)
        if result.device_seconds is not None and workflow.patched(CHARGE_PATCH):
            self.state.gpu_seconds += result.device_seconds + sum(lost)
        if result.note:
            workflow.logger.info("built-in proposer on %s: %s", node.id, result.note)
            self.notes.append(result.note)
        return result.variants

    def _variant_candidate(self, node: Node, k: int, v: int, variant: BuiltinVariant) -> Candidate:
        return Candidate(
            id=str(
                CandidateId(
                    target=self.inp.target.id, iteration=self.state.iteration, state=k, variant=v
                )
            ),
            target_id=self.inp.target.id,
            parent_id=node.id,
            iteration=self.state.iteration,
            source=variant.source,
            plan=Plan(direction=variant.family, description=variant.description),
            proposer="builtin",
            label=variant.label,
        )

    async def _try_variant(self, node: Node, cand: Candidate) -> Decision:
        decision, _ = await self._evaluate(node, cand, "")
        if not decision.accepted:
            self.tree.record_rejection(node.id)
        return decision

    # --- two tiers: screening, then the cascade for the few that matter ---------------------
    async def _screened_round(self, picks: list[tuple[Node, Candidate]]) -> list[Decision]:
        """Screen the round's new sources, gate the policy's choice, record the rest.

        Duplicates and candidates without a source are decided as before; a
        screened-out candidate's decision names the screening and carries its
        estimate, and has no verdicts, numbers or speedup (they are untrusted).
        """
        fresh = [
            (node, cand)
            for node, cand in picks
            if cand.source is not None and not self.tree.has_source(cand.source.sha256)
        ]
        screen = [ScreenCandidate(candidate_id=c.id, source=c.source) for _, c in fresh]
        estimates = await self._screen(screen) if fresh else None
        if estimates is None:  # screening is an aid: without it, every candidate is gated
            return list(await asyncio.gather(*(self._try_variant(n, c) for n, c in picks)))
        members = [n.speedup for n in self.tree.eligible()]
        last = self.state.iteration + 1 >= self.inp.params.iterations
        judged = select_for_cascade(
            estimates, members, self.inp.params.beam, self.inp.params.screen, last_round=last
        )
        by_id = {e.candidate_id: e for e in judged}
        jobs = []
        out: list[Decision] = []
        for node, cand in picks:
            estimate = by_id.get(cand.id)
            if estimate is None or estimate.selected:
                if estimate is not None:
                    self.screened[cand.id] = estimate
                jobs.append(self._try_variant(node, cand))
                continue
            self.state.candidates_tried += 1
            self.tree.record_rejection(node.id)
            reason = f"screened out (untrusted estimate, no verdict): {estimate.why}"[:500]
            out.append(self._decide(cand, SCREENED_OUT, reason, [], screening=estimate))
        return out + list(await asyncio.gather(*jobs))

    async def _screen(self, cands: list[ScreenCandidate]) -> list[ScreeningEstimate] | None:
        """The screening activity on the GPU queue; None when it failed (then all are gated)."""
        if self._exhausted():
            return None
        self.step = f"iteration {self.state.iteration}: screening {len(cands)} candidates"
        inp = ScreenInput(
            **self._step_fields(),
            candidates=cands,
            device=(self.inp.gates or GateSettings()).device,
            seed=self.inp.params.seeds[0] if self.inp.params.seeds else 0,
            params=self.inp.params.screen,
        )
        started = workflow.now()
        try:
            result = await self._on_gpu(
                names.SCREEN, inp, ScreenResult, opts.GATE_CANDIDATE, wall_if_silent=True
            )
        except ActivityError as exc:
            workflow.logger.warning("screening failed, gating every candidate: %s", _cause(exc))
            return None
        self.state.gpu_seconds += self._held(started, result.device_seconds)
        return result.estimates

    # --- gates 1-3 --------------------------------------------------------------------------
    async def _evaluate(
        self, node: Node, cand: Candidate, parse_error: str
    ) -> tuple[Decision, list[GateVerdict]]:
        """Gate one candidate and record its decision (and its state, if it passed)."""
        self.state.candidates_tried += 1
        if cand.source is None:
            return self._decide(cand, "parse", f"unusable reply: {parse_error}", []), []
        if self.tree.has_source(cand.source.sha256):
            return self._decide(cand, "duplicate", "same source as an existing state", []), []
        if self._exhausted():
            return self._decide(
                cand, "budget", f"not evaluated: {self.state.stopped_reason}", []
            ), []
        result, infra = await self._gate(cand)
        verdicts = list(result.verdicts) if result else []
        if any(v.gate == GateName.STATIC and v.passed for v in verdicts):
            self.state.candidates_compiled += 1
        if infra or result is None:
            return self._decide(cand, "infrastructure", infra, verdicts), verdicts
        failed = [v for v in verdicts if not v.passed]
        if failed or not verdicts:
            first = failed[0] if failed else None
            gate = first.gate.value if first else "static"
            reason = f"{first.status.value}: {first.reason}" if first else "no verdicts returned"
            return self._decide(cand, gate, reason, verdicts), verdicts
        child = self.tree.add_child(
            node.id,
            cand.id,
            cand.source.sha256,
            self.state.iteration,
            result.kernel_ms,
            result.baseline_kernel_ms,
            direction=cand.plan.direction if cand.plan else "",
            label=cand.label,
        )
        self.state.sources[cand.id] = cand.source
        self.state.candidates[cand.id] = cand
        speed = f"{child.speedup:.3f}x" if child.speedup else "untimed"
        timed = "whole forward" if workflow.patched(FEEDBACK_PATCH) else "per-kernel"
        reason = f"passed {result.gates_label}; {timed} {speed} ({result.kernel_ms} ms vs {result.baseline_kernel_ms} ms)"
        return self._decide(cand, "", reason, verdicts, result, accepted=True), verdicts

    async def _gate(
        self, cand: Candidate, model_gate: bool = True
    ) -> tuple[CandidateGateResult | None, str]:
        """gate_candidate on the GPU queue: (result, "") or (None, infrastructure error)."""
        if cand.source is None:
            return None, "no source"
        self.step = f"gating {cand.id}"
        # patched() only where gate 3 is asked for: a re-timing writes no marker
        float64 = model_gate and workflow.patched(GATE3_PATCH)
        inp = CandidateGateInput(
            **self._step_fields(),
            candidate_id=cand.id,
            source=cand.source,
            seeds=list(self.inp.params.seeds),
            timeout_s=self.inp.gate_timeout_s,
            model_gate=float64,
            **pinned_gates(self.inp.gates),
        )
        started = workflow.now()
        try:
            result = await self._on_gpu(
                names.GATE_CANDIDATE,
                inp,
                CandidateGateResult,
                opts.GATE_CANDIDATE,
                wall_if_silent=True,
            )
        except ActivityError as exc:
            return None, f"gate_candidate failed: {_cause(exc)}"[:500]
        held = result.device_seconds  # the activity's own run time (None: older history)
        if held is not None and workflow.patched(CHARGE_HELD_PATCH):
            self.state.gpu_seconds += held
            return result, ""
        measured = sum(v.gpu_seconds for v in result.verdicts)
        self.state.gpu_seconds += measured or self._held(started, held)
        return result, ""

    def _decide(
        self,
        cand: Candidate,
        gate: str,
        reason: str,
        verdicts: list[GateVerdict],
        result: CandidateGateResult | None = None,
        accepted: bool = False,
        retime: bool = False,
        screening: ScreeningEstimate | None = None,
    ) -> Decision:
        kernel_ms = result.kernel_ms if result else None
        baseline_ms = result.baseline_kernel_ms if result else None
        speedup = baseline_ms / kernel_ms if kernel_ms and baseline_ms else None
        decision = Decision(
            candidate=cand,
            accepted=accepted,
            deciding_gate=gate,
            reason=reason,
            verdicts=_compact(verdicts),
            kernel_ms=kernel_ms,
            baseline_kernel_ms=baseline_ms,
            at=workflow.now().isoformat(),
            retime=retime,
            speedup=speedup,
            timing=result.timing if result else {},
            screening=screening or self.screened.pop(cand.id, None),
        )
        self.state.decisions.append(decision)
        return decision

    def _accepted(self) -> int:
        return self.state.archived_accepted + passed_gates_1_2(self.state.decisions)

    async def _archive_if_long(self, final: bool = False) -> None:
        """Page decisions and ledger out: at an iteration boundary once there are many (or
        they are large), and everything left when the search ends."""
        items = len(self.state.decisions) + len(self.state.ledger)
        if final:
            # never archived at the end before bounded pages: only with their marker
            work = items > 0 or len(self.state.log_pages) > PAGES_INLINE
            if not work or not workflow.patched(BOUNDED_PAGES_PATCH):
                return
        elif items < ARCHIVE_PAGE_ITEMS:
            # nor below the count: only with the marker, and when the log is large
            due = search_log.due(self.state.decisions, self.state.ledger)
            if not due or not workflow.patched(BOUNDED_PAGES_PATCH):
                return
        elif not workflow.patched(ARCHIVE_PATCH):
            return  # a history from before paging: replay it as it ran
        bounded = workflow.patched(BOUNDED_PAGES_PATCH)
        if not bounded:
            pages = [(self.state.decisions, self.state.ledger)]  # one page, as histories before
        else:
            pages = search_log.cut_pages(self.state.decisions, self.state.ledger) if items else []
        for decisions, ledger in pages:
            page = SearchLogPage(
                campaign_id=self.inp.campaign_id,
                target_id=self.inp.target.id,
                decisions=decisions,
                ledger=ledger,
            )
            self.state.log_pages.append(await self._archive(page))
            self.state.archived_accepted += passed_gates_1_2(decisions)
        self.state.decisions = []
        self.state.ledger = []
        if bounded and len(self.state.log_pages) > PAGES_INLINE:
            # the page list itself grows with the search: fold it into an index page
            index = SearchLogPage(
                campaign_id=self.inp.campaign_id,
                target_id=self.inp.target.id,
                pages=self.state.log_pages,
            )
            self.state.log_pages = [await self._archive(index)]

    async def _archive(self, page: SearchLogPage) -> ArtifactRef:
        return await workflow.execute_activity(
            names.ARCHIVE_SEARCH_LOG,
            page,
            result_type=ArtifactRef,
            task_queue=self.inp.cpu_queue,
            **opts.REPORT.kwargs(),
        )

    def _prune_if_large(self) -> None:
        """At an iteration boundary: keep the carried tree bounded (``SearchTree.prune``)."""
        states = len(self.tree.nodes) - 1
        if states <= 2 * TREE_KEEP_BOUNDED:
            return
        keep = TREE_KEEP_BOUNDED if workflow.patched(PRUNED_CAP_PATCH) else TREE_KEEP
        if states <= 2 * keep:
            return
        if not workflow.patched(PRUNE_PATCH):
            return  # a history from before pruning: replay it as it ran
        for node_id in self.tree.prune(keep, self.inp.params.ucb_c):
            self.state.candidates.pop(node_id, None)
            self.state.sources.pop(node_id, None)
            self.state.profiles.pop(node_id, None)
            self.state.tried_plans.pop(node_id, None)
        keep = max(DIRECTIONS_KEPT, self.inp.params.meltdown_window)
        self.state.directions = self.state.directions[-keep:]
        if keep == TREE_KEEP_BOUNDED:  # the same patch caps the pruned digests
            del self.tree.pruned_sources[:-PRUNED_SOURCES_KEPT]

    # --- re-timing ------------------------------------------------------------------------
    async def _retime_winners(self) -> list[Decision]:
        """Winners are timed again before they may seed a round (docs/method.md#checker)."""
        decisions = []
        # patched() only in the last round: histories of earlier rounds carry no marker
        last = self.state.iteration + 1 >= self.inp.params.iterations and workflow.patched(
            RETIME_LAST_PATCH
        )
        for node in self.tree.winners_to_retime(self.state.iteration, self.inp.params.beam, last):
            if self._exhausted():
                break
            cand = self.state.candidates[node.id]
            self.step = f"re-timing {node.id}"
            result, infra = await self._gate(
                cand.model_copy(update={"id": cand.id + RETIME_SUFFIX}), model_gate=False
            )
            ok = result is not None and not infra and result.passed and result.kernel_ms is not None
            first = node.speedup
            self.tree.apply_retime(
                node.id,
                result.kernel_ms if result else None,
                result.baseline_kernel_ms if result else None,
                ok,
            )
            if ok:
                reason = f"re-timed: {first:.3f}x then {result.baseline_kernel_ms / result.kernel_ms:.3f}x; keeps {node.speedup:.3f}x"
            else:
                reason = f"re-timing failed, state dropped: {infra or 'gates no longer pass'}"
            verdicts = list(result.verdicts) if result else []
            decisions.append(
                self._decide(cand, "" if ok else "retime", reason, verdicts, result, ok, True)
            )
        return decisions

    # --- memory -----------------------------------------------------------------------------
    def _tags(self) -> list[str]:
        kind = self.inp.target.kind.value
        if self.inp.target.kernels and self.inp.segment is not None:
            for kernel in self.inp.segment.kernels:
                if kernel.name == self.inp.target.kernels[0] and kernel.kind:
                    kind = kernel.kind
        elif self.inp.scope is not None and self.inp.scope.kernel_kind:
            kind = self.inp.scope.kernel_kind  # the scope's reference names it
        tags = [f"kind/{kind}", f"target/{self.inp.target.kind.value}"]
        root = self.state.profiles.get(ROOT_ID)
        if root is not None:
            tags.append(f"bottleneck/{root.analysis.bottleneck.value}")
        return tags

    async def _summarize(self, decisions: list[Decision]) -> None:
        if not decisions or self._exhausted():
            return
        self.step = f"summarizing iteration {self.state.iteration}"
        inp = SummarizeInput(
            target=self.inp.target,
            outcomes=[],
            proposer=self.inp.proposer,
            campaign_id=self.inp.campaign_id,
            use_llm=self.inp.use_llm,
            tags=self._tags(),
            memory=self.state.memory,
            share_memory=self.inp.share_memory,
            iteration=self.state.iteration,
            # a screened-out variant has no verdict: its untrusted number teaches nothing; an
            # LLM candidate's reason tells the agent's later rounds it was screened out
            decisions=[
                d
                for d in decisions
                if not d.retime and (self.inp.use_llm or d.deciding_gate != SCREENED_OUT)
            ],
        )
        if self.deferred is not None:
            ids = (self.inp.campaign_id, self.inp.target.id, self.state.iteration)
            result = await self.deferred.call(
                names.SUMMARIZE, inp, SummarizeResult, ids, fatal=False
            )
            if result is None:
                return
        else:
            try:
                result = await workflow.execute_activity(
                    names.SUMMARIZE,
                    inp,
                    result_type=SummarizeResult,
                    task_queue=self.inp.cpu_queue,
                    **(opts.LLM if self.inp.use_llm else opts.BUILTIN).kwargs(),
                )
            except ActivityError as exc:  # memory is an aid, not a requirement
                workflow.logger.warning("summarize failed: %s", _cause(exc))
                return
        if self.inp.use_llm:
            self._ledger(
                "summarizer",
                f"i{self.state.iteration}/summary",
                result.usage,
                result.prompt,
                result.reply,
            )
        self.state.experience.extend(result.entries)
        del self.state.experience[:-EXPERIENCE_KEPT]  # the memory artifact keeps them all
        self.state.memory = result.memory or self.state.memory

    # --- bookkeeping ------------------------------------------------------------------------
    def _ledger(
        self,
        role: str,
        call_id: str,
        usage: Usage,
        prompt: ArtifactRef | None,
        reply: ArtifactRef | None,
    ) -> None:
        self.state.usage = self.state.usage.plus(usage)
        self.state.ledger.append(
            LedgerEntry(
                role=role,
                call_id=call_id,
                model=self.inp.proposer.model,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                usd=usage.usd,
                prompt=prompt,
                reply=reply,
                at=workflow.now().isoformat(),
            )
        )

    def _carry(self) -> SearchKernelInput:
        self.state.tree = self.tree.to_dict()
        self.state.wall_seconds = self._spend().wall_seconds
        return self.inp.model_copy(update={"state": self.state.model_dump(mode="json")})

    def _result(self) -> SearchKernelResult:
        best = self.tree.best() if self.tree else None
        runners_up: list[Node] = []
        if self.tree and workflow.patched(RUNNERS_UP_PATCH):
            ranked = self.tree.ranked_winners(1 + RUNNERS_UP)[1:]
            runners_up = [n for n in ranked if n.id in self.state.candidates]
        return SearchKernelResult(
            target_id=self.inp.target.id,
            best=self.state.candidates.get(best.id) if best else None,
            best_kernel_speedup=best.speedup if best else None,
            best_kernel_ms=best.kernel_ms if best else None,
            baseline_kernel_ms=best.baseline_ms if best else None,
            decisions=self.state.decisions,
            candidates_tried=self.state.candidates_tried,
            candidates_compiled=self.state.candidates_compiled,
            usage=self.state.usage,
            gpu_seconds=self.state.gpu_seconds,
            stopped_reason=self.state.stopped_reason,
            experience=self.state.experience,
            proposer=self.proposer,
            root_profile=self.state.profiles.get(ROOT_ID),
            memory=self.state.memory,
            ledger=self.state.ledger,
            iterations_done=self.state.iteration,
            log_pages=self.state.log_pages,
            candidates_accepted=self._accepted(),
            runners_up=[self.state.candidates[n.id] for n in runners_up],
        )


__all__ = ["SearchKernel"]
