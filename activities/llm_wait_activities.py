"""Temporal activities of batch and reply-folder mode: prepare, submit, poll, answer, withdraw.

Each is short (seconds): the hours of waiting happen in the workflow as
timers between polls (``workflows.deferred_llm``), so nothing long-running
is lost when a worker or the server restarts.  The roles are the sync ones:
``prepare`` runs a role until it would send its request, ``answer`` runs it
again with the stored reply in place of the endpoint.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel
from temporalio import activity

from activities.heartbeat import heartbeating, in_thread
from activities.search_activities import _sorted_failures
from kernelopt.agents import batch, reply_folder, roles
from kernelopt.agents import quirks as quirk_store
from kernelopt.agents.deferred import (
    LLM_ANSWER,
    LLM_POLL,
    LLM_PREPARE,
    LLM_SUBMIT,
    LLM_WITHDRAW,
    AnswerInput,
    LlmCall,
    PollInput,
    PollResult,
    PreparedRequest,
    SubmitInput,
    WithdrawInput,
    estimate_tokens,
    stored_completion,
    stored_text,
)
from kernelopt.agents.ledger import cost_usd
from kernelopt.agents.plan_retry import planner_transport
from kernelopt.agents.transport import (
    ChatReply,
    Message,
    make_client,
    reply_from,
    sorted_status_error,
    strip_think,
)
from kernelopt.config import Settings
from kernelopt.contracts import names
from kernelopt.contracts.search import (
    ExecuteInput,
    PlanInput,
    ProposerConfig,
    SummarizeInput,
    Usage,
)
from kernelopt.errors import InfrastructureError, LLMReplyError
from kernelopt.store import ArtifactStore, open_store

INPUTS: dict[str, type[BaseModel]] = {
    names.PLAN: PlanInput,
    names.EXECUTE: ExecuteInput,
    names.RETRY_FIX: ExecuteInput,
    names.SUMMARIZE: SummarizeInput,
}


class _Captured(Exception):
    def __init__(self, messages: list[Message]) -> None:
        super().__init__("request captured")
        self.messages = messages


class CapturingTransport:
    """Stops the role at its request: the messages are what batch/folder mode sends."""

    async def complete(self, messages: list[Message]) -> ChatReply:
        raise _Captured(messages)


class StoredReplyTransport:
    """Returns the reply that arrived out of band, as the endpoint would have."""

    def __init__(self, config: ProposerConfig, stored: dict[str, Any]) -> None:
        self.config = config
        self.stored = stored

    async def complete(self, messages: list[Message]) -> ChatReply:
        if self.stored.get("source") == "batch":
            from openai.types.chat import ChatCompletion

            return reply_from(self.config, ChatCompletion.model_validate(self.stored["completion"]))
        text = strip_think(str(self.stored.get("text", "")))
        prompt = estimate_tokens("".join(m.get("content", "") for m in messages))
        completion = estimate_tokens(text)
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            usd=cost_usd(self.config, prompt, completion),
            calls=1,
        )
        return ChatReply(text=text, usage=usage, model="reply-folder", finish_reason="stop")


async def _run_role(call: LlmCall, store: ArtifactStore, transport: Any) -> BaseModel:
    model = INPUTS.get(call.role)
    if model is None:
        raise LLMReplyError(f"no role {call.role!r}")
    inp: Any = model.model_validate(call.payload)
    home = Settings.from_env().home
    if call.role == names.PLAN:
        return await roles.plan(inp, store, planner_transport(inp, store, transport), home)
    if call.role == names.EXECUTE:
        return await roles.execute(inp, store, transport)
    if call.role == names.RETRY_FIX:
        return await roles.retry_fix(inp, store, transport)
    return await roles.summarize(inp, store, transport, home)


def reply_format(call: LlmCall) -> str:
    """What a usable reply looks like, in one line (the prompt says it at length)."""
    if call.role == names.PLAN:
        n = call.payload.get("plans", 4)
        return (
            'One JSON object {"plans": [{"direction": "<short label>", "description": '
            f'"<what to change and why>"}}]}} with at most {n} plans, or '
            '{"plans": [], "no_plan": "<why no plan can make the target fast enough>"}.'
        )
    if call.role == names.SUMMARIZE:
        return (
            'One JSON object {"entries": [{"situation": "...", "action": "...", '
            '"effect": "...", "tags": ["..."]}]} with at most 4 entries.'
        )
    inp = ExecuteInput.model_validate(call.payload)
    entry = ", ".join(inp.entry_points or roles.entry_points_for(inp.target))
    return (
        "One fenced ```python block holding the complete replacement module; it must define "
        f"at module level one of: {entry}."
    )


@activity.defn(name=LLM_PREPARE)
async def llm_prepare(call: LlmCall) -> PreparedRequest:
    """Build the role's messages as sync mode would, and store them."""
    with _sorted_failures():
        store = open_store()
        try:
            async with heartbeating():  # memory retrieval and large prompts can take a while
                await _run_role(call, store, CapturingTransport())
        except _Captured as captured:
            ref = store.put_text(
                json.dumps(captured.messages, indent=1),
                "application/json",
                f"{call.request_id}.request.json",
            )
            return PreparedRequest(
                **call.request_fields(), messages=ref, reply_format=reply_format(call)
            )
        raise LLMReplyError(f"role {call.role} sent no request")


@contextlib.asynccontextmanager
async def _client(config: ProposerConfig) -> AsyncIterator[openai.AsyncOpenAI]:
    client = make_client(config)
    try:
        yield client
    finally:
        await client.close()


async def _endpoint(fn: Callable[[], Awaitable[Any]]) -> Any:
    """An endpoint call with the transport's failure sorting."""
    try:
        return await fn()
    except (openai.APIConnectionError, openai.RateLimitError) as exc:
        raise InfrastructureError(f"LLM endpoint unavailable: {exc}") from exc
    except openai.APIStatusError as exc:
        raise sorted_status_error(exc) from exc


def _messages(store: ArtifactStore, ref: Any) -> list[Message]:
    return json.loads(store.get_text(ref))


@activity.defn(name=LLM_SUBMIT)
async def llm_submit(inp: SubmitInput) -> str:
    """Send a round's requests: one batch job, or one file each; returns the handle."""
    with _sorted_failures():
        store = open_store()
        async with heartbeating():
            if inp.proposer.mode == "folder":
                f = reply_folder.folders()
                for req in inp.requests:
                    await in_thread(
                        reply_folder.write_request, f, req, _messages(store, req.messages)
                    )
                return "folder"
            home = Settings.from_env().home
            key = quirk_store.key_of(inp.proposer.base_url, inp.proposer.model)
            quirks = quirk_store.lookup(home, key)
            requests = [(r.request_id, _messages(store, r.messages)) for r in inp.requests]
            async with _client(inp.proposer) as client:
                return await _endpoint(
                    lambda: batch.submit(client, inp.proposer, quirks, requests, inp.key)
                )


def _poll_folder(inp: PollInput, store: ArtifactStore) -> PollResult:
    f = reply_folder.folders()
    replies = {}
    for rid in inp.request_ids:
        path = reply_folder.find_reply(f, rid)
        if path is None:
            continue
        text = Path(path).read_text(errors="replace")
        replies[rid] = store.put_text(stored_text(text), "application/json", f"{rid}.reply.json")
        reply_folder.collect(f, rid, path)
    return PollResult(replies=replies, status=f"{len(replies)} of {len(inp.request_ids)} answered")


@activity.defn(name=LLM_POLL)
async def llm_poll(inp: PollInput) -> PollResult:
    """One look: which of the requests have a reply now (stored), which failed for good."""
    with _sorted_failures():
        store = open_store()
        if inp.proposer.mode == "folder":
            return await in_thread(_poll_folder, inp, store)
        async with heartbeating(), _client(inp.proposer) as client:
            state = await _endpoint(lambda: batch.poll(client, inp.handle))
        if not state.ended:
            return PollResult(status=state.status)
        replies, failed = {}, {}
        for rid in inp.request_ids:
            if rid in state.completions:
                text = stored_completion(state.completions[rid])
                replies[rid] = store.put_text(text, "application/json", f"{rid}.reply.json")
            else:
                failed[rid] = state.errors.get(rid, f"batch {state.status} without a reply")
        return PollResult(replies=replies, failed=failed, status=state.status)


@activity.defn(name=LLM_ANSWER)
async def llm_answer(inp: AnswerInput) -> Any:
    """The role's result from the stored reply (parsed, stored and counted as in sync mode)."""
    with _sorted_failures():
        store = open_store()
        stored = json.loads(store.get_text(inp.reply))
        config = INPUTS[inp.call.role].model_validate(inp.call.payload).proposer  # type: ignore[attr-defined]
        async with heartbeating():
            return await _run_role(inp.call, store, StoredReplyTransport(config, stored))


@activity.defn(name=LLM_WITHDRAW)
async def llm_withdraw(inp: WithdrawInput) -> None:
    """Nobody waits for these any more: cancel the batch, or move the request files away."""
    with _sorted_failures():
        if inp.proposer.mode == "folder":
            await in_thread(
                reply_folder.withdraw, reply_folder.folders(), inp.request_ids, inp.reason
            )
            return
        async with heartbeating(), _client(inp.proposer) as client:
            with contextlib.suppress(InfrastructureError, openai.APIStatusError):
                await _endpoint(lambda: batch.cancel(client, inp.handle))


CPU_ACTIVITIES = [llm_prepare, llm_submit, llm_poll, llm_answer, llm_withdraw]
