"""The planner's one retry after a reply it could not parse.

A planner parse failure used to waste that beam state's whole round.  The
retry continues the same conversation: the unusable reply goes back as the
assistant's turn, followed by what was wrong, so the model can correct the
format instead of planning from scratch.  ``roles.plan`` is unchanged: the
extra turns are added by wrapping the transport it is handed.
"""

from __future__ import annotations

from typing import Protocol

from kernelopt.agents.chat import ChatReply, Message
from kernelopt.contracts.search import PlanInput
from kernelopt.store import ArtifactStore

PLAN_RETRY_NOTE = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with only the JSON object described above (at most {plans} plans)."
)


class Completes(Protocol):
    async def complete(self, messages: list[Message]) -> ChatReply: ...


class FollowUpTransport:
    """Sends every request with extra turns appended (the failed reply and the note)."""

    def __init__(self, inner: Completes, extra: list[Message]) -> None:
        self.inner = inner
        self.extra = extra

    async def complete(self, messages: list[Message]) -> ChatReply:
        return await self.inner.complete([*messages, *self.extra])


def planner_transport(inp: PlanInput, store: ArtifactStore, transport: Completes) -> Completes:
    """``transport`` as is, or wrapped with the retry turns when ``inp`` is a retry."""
    if inp.parse_retry is None:
        return transport
    note = PLAN_RETRY_NOTE.format(error=inp.parse_error or "unparseable", plans=inp.plans)
    extra: list[Message] = [
        {"role": "assistant", "content": store.get_text(inp.parse_retry)},
        {"role": "user", "content": note},
    ]
    return FollowUpTransport(transport, extra)
