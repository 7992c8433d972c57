"""Durable waiting for LLM replies in batch and reply-folder mode (inside SearchKernel).

Calls that start together (a round's planners, then its executors) are
gathered into one submission: a request joins the open submission while any
sibling is still preparing its own, and the submission leaves a short settle
time after the last one joined.  The wait itself is a timer loop with short
poll activities, not one long heartbeating activity: between polls nothing
runs anywhere, so a worker or server restart loses nothing (the timer lives
in the server's database and the next worker replays up to it), budgets and
the ``stop`` signal are checked at every wake-up, and a ``kernelopt reply``
signal wakes it at once.  Poll pauses grow from a few seconds to
``poll_s``, so hours of waiting add a few hundred events to the history.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from kernelopt.agents import deferred
    from kernelopt.contracts.base import ArtifactRef
    from kernelopt.contracts.search import ProposerConfig

    from . import activity_options as opts

SETTLE_S = 2.0  # siblings that finish preparing within this join the same submission
FIRST_POLL_S = 5.0


class Owner(Protocol):
    """What the waiting needs from its search: budgets, stop reasons, ids."""

    def should_stop(self) -> str: ...  # "" or why the search is ending

    def end_search(self, reason: str) -> None: ...


class DeferredLLM:
    def __init__(self, owner: Owner, proposer: ProposerConfig, cpu_queue: str) -> None:
        self.owner = owner
        self.proposer = proposer
        self.cpu_queue = cpu_queue
        self.queue: list[deferred.PreparedRequest] = []
        self.preparing = 0
        self.flushing = False
        self.results: dict[str, ArtifactRef | str] = {}
        self.seq = 0
        self.submissions = 0
        self.wake = False
        self.waiting: dict[str, str] = {}  # request id -> role, for the progress query
        self.flusher: asyncio.Task[None] | None = None

    def wake_up(self) -> None:
        """A reply was delivered: poll now instead of at the end of the pause."""
        self.wake = True

    async def call(
        self,
        role: str,
        inp: Any,
        result_type: type,
        ids: tuple[str, str, int],
        fatal: bool = True,
    ) -> Any | None:
        """The role's result once its reply has arrived; None when the search ends first.

        ``ids`` is (campaign, target, round).  A failure ends the search like a
        failing endpoint in sync mode, unless ``fatal`` is off (the summarizer).
        """
        campaign_id, target_id, it = ids
        end = self.owner.end_search if fatal else _log
        if self.owner.should_stop():
            return None
        self.seq += 1
        info = workflow.info()
        rid = deferred.request_id(
            campaign_id or "campaign",
            target_id,
            f"i{it}",
            role,
            f"{self.seq:03d}",
            str(workflow.uuid4())[:6],
        )
        call = deferred.LlmCall(
            request_id=rid,
            role=role,
            payload=inp.model_dump(mode="json"),
            workflow_id=info.workflow_id,
            campaign_id=campaign_id,
            target_id=target_id,
            iteration=it,
        )
        self.preparing += 1
        try:
            prepared = await self._activity(deferred.LLM_PREPARE, call, deferred.PreparedRequest)
        except ActivityError as exc:
            end(f"LLM {role} failed: {_cause(exc)}"[:500])
            return None
        finally:
            self.preparing -= 1
        self.queue.append(prepared)
        self.waiting[rid] = role
        if not self.flushing:
            self.flushing = True
            self.flusher = asyncio.create_task(self._flush())
        await workflow.wait_condition(lambda: rid in self.results)
        self.waiting.pop(rid, None)
        got = self.results.pop(rid)
        if isinstance(got, str):
            end(f"LLM {role} not answered: {got}"[:500])
            return None
        try:
            return await self._activity(
                deferred.LLM_ANSWER, deferred.AnswerInput(call=call, reply=got), result_type
            )
        except ActivityError as exc:
            end(f"LLM {role} failed: {_cause(exc)}"[:500])
            return None

    async def _activity(self, name: str, arg: Any, result_type: type | None) -> Any:
        return await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            task_queue=self.cpu_queue,
            **opts.LLM_STEP.kwargs(),
        )

    async def _flush(self) -> None:
        """Wait until no sibling is still preparing, then submit what has gathered."""
        while True:
            await workflow.wait_condition(lambda: self.preparing == 0)
            await workflow.sleep(SETTLE_S)
            if self.preparing == 0:
                break
        batch, self.queue = self.queue, []
        self.flushing = False
        if batch:
            await self._wait_for(batch)

    def _fail(self, rids: set[str], why: str) -> None:
        for rid in rids:
            self.results[rid] = why

    async def _wait_for(self, batch: list[deferred.PreparedRequest]) -> None:
        """Submit one batch and poll, on timers, until every request has its reply."""
        info = workflow.info()
        self.submissions += 1
        key = f"{info.workflow_id}/{info.run_id[:8]}/{self.submissions}"
        outstanding = {r.request_id for r in batch}
        try:
            handle = await self._activity(
                deferred.LLM_SUBMIT,
                deferred.SubmitInput(proposer=self.proposer, requests=batch, key=key),
                str,
            )
        except ActivityError as exc:
            self._fail(outstanding, f"submit failed: {_cause(exc)}")
            return
        started = workflow.now()
        pause = min(FIRST_POLL_S, self.proposer.poll_s)
        while outstanding:
            self.wake = False  # a reply delivered from here on wakes the pause below
            try:
                polled = await self._activity(
                    deferred.LLM_POLL,
                    deferred.PollInput(
                        proposer=self.proposer, handle=handle, request_ids=sorted(outstanding)
                    ),
                    deferred.PollResult,
                )
            except ActivityError as exc:
                self._fail(outstanding, f"polling failed: {_cause(exc)}")
                return
            for rid, ref in polled.replies.items():
                self.results[rid] = ref
                outstanding.discard(rid)
            for rid, why in polled.failed.items():
                self.results[rid] = why
                outstanding.discard(rid)
            if not outstanding:
                return
            waited = (workflow.now() - started).total_seconds()
            reason = self.owner.should_stop()
            if not reason and waited >= self.proposer.wait_limit_s:
                reason = f"no reply within the wait limit ({self.proposer.wait_limit_s:.0f} s)"
            if reason:
                await self._withdraw(handle, outstanding, reason)
                self._fail(outstanding, reason)
                return
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self.wake or bool(self.owner.should_stop()),
                    timeout=timedelta(seconds=pause),
                )
            pause = min(pause * 2, self.proposer.poll_s)

    async def _withdraw(self, handle: str, rids: set[str], reason: str) -> None:
        try:
            await self._activity(
                deferred.LLM_WITHDRAW,
                deferred.WithdrawInput(
                    proposer=self.proposer, handle=handle, request_ids=sorted(rids), reason=reason
                ),
                None,
            )
        except ActivityError as exc:  # the search ends anyway; the batch may run on unused
            workflow.logger.warning("withdrawing LLM requests failed: %s", _cause(exc))


def _log(reason: str) -> None:
    workflow.logger.warning("%s", reason)


def _cause(exc: BaseException) -> str:
    inner = getattr(exc, "cause", None)
    return str(inner or exc)
