"""The three LLM roles: build the prompt, call the endpoint, parse, store.

Each role is one async function over its contract (``PlanInput`` ->
``PlanResult`` ...), an artifact store and a transport, so the activities
stay thin and the roles are testable against any OpenAI-compatible server.
A reply the parser rejects is a *result* (``error`` set, usage still
counted), never an exception: the workflow decides what happens next
(retry-fix for the executor, an empty round for the planner).
"""

from __future__ import annotations

import json

from kernelopt.agents import messages as messages_mod
from kernelopt.agents import prompts
from kernelopt.agents.parsing import (
    parse_decline,
    parse_experiences,
    parse_kernel_reply,
    parse_plans,
)
from kernelopt.agents.plans import dedupe_plans
from kernelopt.agents.result_text import change_note, render_summary_outcome
from kernelopt.agents.transport import ChatTransport, Message
from kernelopt.contracts.search import (
    Decision,
    ExecuteInput,
    ExecuteResult,
    Experience,
    PlanInput,
    PlanResult,
    SummarizeInput,
    SummarizeResult,
    Usage,
)
from kernelopt.errors import LLMReplyError
from kernelopt.log import get_logger
from kernelopt.memory import ExperienceMemory, update_shared
from kernelopt.proposer.knowledge import family_of, pattern_of
from kernelopt.store import ArtifactError, ArtifactStore

log = get_logger(__name__)

MAX_SUMMARY_ENTRIES = 4

# kept importable from here: the builders moved to ``agents.messages``
candidate_contract = messages_mod.candidate_contract
entry_points_for = messages_mod.entry_points_for
_target_kind = messages_mod.target_kind


def _store_messages(store: ArtifactStore, messages: list[Message], name: str):
    return store.put_text(json.dumps(messages, indent=1), "application/json", name)


def _load_messages(store: ArtifactStore, inp: ExecuteInput) -> list[Message]:
    if inp.conversation is None:
        raise LLMReplyError("retry-fix needs the conversation of the first attempt")
    data = json.loads(store.get_text(inp.conversation))
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise LLMReplyError("the stored conversation is not a list of messages")
    return data


async def plan(
    inp: PlanInput, store: ArtifactStore, transport: ChatTransport, home=None
) -> PlanResult:
    messages = messages_mod.planner_messages(inp, store, home)
    call = f"{inp.target.id}-i{inp.iteration}-{inp.state_id or 'root'}-plan"
    prompt_ref = _store_messages(store, messages, f"{call}.prompt.json")
    reply = await transport.complete(messages)
    reply_ref = store.put_text(reply.text, "text/markdown", f"{call}.reply.md")
    declined = parse_decline(reply.text)
    if declined:
        log.info("planner_declined", target=inp.target.id, reason=declined)
        return PlanResult(
            plans=[], usage=reply.usage, prompt=prompt_ref, reply=reply_ref, declined=declined
        )
    try:
        plans = parse_plans(reply.text, inp.plans, inp.banned_directions)
        plans, dropped = dedupe_plans(plans, inp.tried_plans)
        if not plans:
            raise LLMReplyError(
                "every proposed plan repeats one already tried: "
                + ", ".join(p.direction for p in dropped)
            )
    except LLMReplyError as exc:
        return PlanResult(
            plans=[], usage=reply.usage, prompt=prompt_ref, reply=reply_ref, error=str(exc)
        )
    if dropped:
        log.info("plans_deduplicated", target=inp.target.id, dropped=[p.direction for p in dropped])
    return PlanResult(plans=plans, usage=reply.usage, prompt=prompt_ref, reply=reply_ref)


async def execute(
    inp: ExecuteInput, store: ArtifactStore, transport: ChatTransport
) -> ExecuteResult:
    """First attempt for a plan: a fresh conversation."""
    messages = messages_mod.executor_messages(inp, store)
    return await _converse(inp, store, transport, messages, _accepted(inp))


def _accepted(inp: ExecuteInput) -> list[str]:
    return inp.entry_points or entry_points_for(inp.target)


async def retry_fix(
    inp: ExecuteInput, store: ArtifactStore, transport: ChatTransport
) -> ExecuteResult:
    """A later attempt: the rejection (or the timing result) goes back into the same conversation."""
    messages = _load_messages(store, inp)
    messages.append(messages_mod.retry_message(inp, messages))
    return await _converse(inp, store, transport, messages, _accepted(inp))


async def _converse(
    inp: ExecuteInput,
    store: ArtifactStore,
    transport: ChatTransport,
    messages: list[Message],
    entry_points: list[str],
) -> ExecuteResult:
    reply = await transport.complete(messages)
    messages = [*messages, {"role": "assistant", "content": reply.text}]
    name = inp.candidate_id.replace("/", "_") or "candidate"
    conversation = _store_messages(store, messages, f"{name}.conversation.json")
    reply_ref = store.put_text(reply.text, "text/markdown", f"{name}.reply.md")
    try:
        code = parse_kernel_reply(reply.text, entry_points)
    except LLMReplyError as exc:
        return ExecuteResult(
            source=None,
            conversation=conversation,
            usage=reply.usage,
            error=str(exc),
            reply=reply_ref,
        )
    source = store.put_text(code, "text/x-python", f"{name}.py")
    return ExecuteResult(
        source=source, conversation=conversation, usage=reply.usage, reply=reply_ref
    )


def _author_note(store: ArtifactStore, decision: Decision) -> str:
    """The candidate's own reply, outside its code: what it says it did (a retry may have
    dropped its plan).  Empty when its conversation is not stored or not readable."""
    ref = decision.candidate.conversation
    if ref is None:
        return ""
    try:
        messages = json.loads(store.get_text(ref))
    except (ArtifactError, OSError, ValueError):
        return ""
    if not isinstance(messages, list):
        return ""
    replies = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    content = replies[-1].get("content") if replies else None
    return change_note(content) if isinstance(content, str) else ""


async def summarize(
    inp: SummarizeInput, store: ArtifactStore, transport: ChatTransport | None, home=None
) -> SummarizeResult:
    """Distil the iteration into experience entries and fold them into memory."""
    outcomes = [
        *inp.outcomes,
        *(render_summary_outcome(d, _author_note(store, d)) for d in inp.decisions),
    ]
    usage = Usage()
    prompt_ref = reply_ref = None
    error = ""
    if inp.use_llm and transport is not None and outcomes:
        messages: list[Message] = [
            {
                "role": "system",
                "content": prompts.SUMMARIZER_SYSTEM.format(max_entries=MAX_SUMMARY_ENTRIES),
            },
            {
                "role": "user",
                "content": prompts.SUMMARIZER_USER.format(
                    target_id=inp.target.id,
                    target_kind=_target_kind(inp.target),
                    iteration=inp.iteration,
                    outcomes="\n".join(outcomes),
                ),
            },
        ]
        call = f"{inp.target.id}-i{inp.iteration}-summary"
        prompt_ref = _store_messages(store, messages, f"{call}.prompt.json")
        reply = await transport.complete(messages)
        usage = reply.usage
        reply_ref = store.put_text(reply.text, "text/markdown", f"{call}.reply.md")
        try:
            entries = parse_experiences(reply.text, MAX_SUMMARY_ENTRIES)
        except LLMReplyError as exc:
            entries, error = [], str(exc)
    else:
        entries = mechanical_experience(inp)
    entries = [e.model_copy(update={"tags": sorted({*e.tags, *inp.tags})}) for e in entries]
    memory = ExperienceMemory.load(store, inp.memory)
    memory.add(entries, inp.campaign_id)
    ref = memory.save(store, f"{inp.campaign_id or 'campaign'}.memory.json")
    if inp.share_memory and home is not None and entries:
        update_shared(home, memory)
    return SummarizeResult(
        entries=entries, usage=usage, memory=ref, prompt=prompt_ref, reply=reply_ref, error=error
    )


def mechanical_experience(inp: SummarizeInput) -> list[Experience]:
    """Without an LLM: the iteration's best verified launch config is the lesson.

    Only accepted, timed candidates that beat their baseline produce an entry,
    so memory holds measured facts, not guesses.
    """
    kind = next((t.split("/", 1)[1] for t in inp.tags if t.startswith("kind/")), "kernel")
    bottleneck = next((t.split("/", 1)[1] for t in inp.tags if t.startswith("bottleneck/")), "")
    winners = [d for d in inp.decisions if d.accepted and not d.retime and (d.speedup or 0.0) > 1.0]
    if not winners:
        return []
    best = max(winners, key=lambda d: d.speedup or 0.0)  # first of equals: deterministic
    label = best.candidate.label
    if not label:  # an LLM candidate summarised without an LLM
        what = best.candidate.plan.direction if best.candidate.plan else ""
        action, tags = f"apply {what}", ["direction/llm"]
    else:
        family, pattern = family_of(label), pattern_of(label)
        action = {
            "template": f"use the expert template {pattern} ({label})",
            "rewrite": f"rewrite the forward: {pattern}",
            "regen": f"regenerate the forward with Inductor under {pattern}",
            "library": f"make the library choice {label} (changes f)",
        }.get(family, f"pin launch config {label}")
        tags = [f"direction/{family}", f"pattern/{pattern.replace(':', '/')}"]
    return [
        Experience(
            situation=f"{kind} kernel" + (f", {bottleneck}" if bottleneck else ""),
            action=action,
            effect=f"{best.speedup:.3f}x per kernel on "
            + (", ".join(inp.target.kernels) or inp.target.id),
            tags=tags,
        )
    ]
