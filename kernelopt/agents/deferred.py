"""Replies that arrive later: the contracts and helpers batch and reply-folder modes share.

In ``batch`` and ``folder`` mode an LLM call is split in three short steps
around a durable wait in the workflow (``workflows.deferred_llm``):

1. *prepare*: the role builds its prompt exactly as in sync mode, but a
   capturing transport stops it at the request (``PreparedRequest``);
2. the workflow submits a round's requests together (one Batch API job, or
   one file each) and polls on a timer until every reply is in;
3. *answer*: the role runs again with a transport that returns the stored
   reply, so parsing, artifacts and usage are those of sync mode.

Standard library and pydantic only: the workflow imports these contracts.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import Field

from kernelopt.contracts.base import ArtifactRef, Frozen
from kernelopt.contracts.search import ProposerConfig

LLM_PREPARE = "llm_prepare"
LLM_SUBMIT = "llm_submit"
LLM_POLL = "llm_poll"
LLM_ANSWER = "llm_answer"
LLM_WITHDRAW = "llm_withdraw"
LLM_REPLY_SIGNAL = "llm_reply"  # `kernelopt reply` wakes the waiting search at once

MODES = ("sync", "batch", "folder")
CHARS_PER_TOKEN = 4  # folder replies carry no token counts: usage is estimated from text


class DeferredRequest(Frozen):
    """Which role call this is and where it comes from: every step of the call carries it."""

    request_id: str
    role: str  # the sync activity's name: plan / execute / retry_fix / summarize
    workflow_id: str = ""
    campaign_id: str = ""
    target_id: str = ""
    iteration: int = 0

    def request_fields(self) -> dict[str, Any]:
        """These fields alone, to carry the call into its next step's model."""
        return {name: getattr(self, name) for name in DeferredRequest.model_fields}


class LlmCall(DeferredRequest):
    """One role call the workflow wants answered out of band."""

    payload: dict[str, Any]  # that activity's input, as JSON


class PreparedRequest(DeferredRequest):
    """What goes out: the messages (stored) and what a reply must look like."""

    messages: ArtifactRef
    reply_format: str


class SubmitInput(Frozen):
    proposer: ProposerConfig
    requests: list[PreparedRequest]
    key: str  # unique per submission: a retried submit finds its own batch again


class PollInput(Frozen):
    proposer: ProposerConfig
    handle: str  # the batch id ("folder" in folder mode)
    request_ids: list[str]


class PollResult(Frozen):
    replies: dict[str, ArtifactRef] = Field(default_factory=dict)  # stored reply per id
    failed: dict[str, str] = Field(default_factory=dict)  # why, per id
    status: str = ""


class WithdrawInput(Frozen):
    proposer: ProposerConfig
    handle: str
    request_ids: list[str]
    reason: str = ""


class AnswerInput(Frozen):
    call: LlmCall
    reply: ArtifactRef


def request_id(*parts: str) -> str:
    """A file-name-safe id from readable parts."""
    text = "-".join(p for p in parts if p)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:160]


def stored_completion(completion: dict[str, Any]) -> str:
    """The artifact text of a batch reply: the endpoint's chat completion body."""
    return json.dumps({"source": "batch", "completion": completion})


def stored_text(text: str) -> str:
    """The artifact text of a folder reply: the reply as written."""
    return json.dumps({"source": "folder", "text": text})


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)
