"""Batch mode: a round's requests as one OpenAI-compatible Batch API job.

Batch APIs answer within hours at about half the price.  Submitting uploads
one JSONL file (``/v1/files``, purpose ``batch``) and creates a batch over it
(``/v1/batches``); polling reads the batch and, once it has ended, downloads
the output and error files (``/v1/files/{id}/content``).  Each line's
``custom_id`` is the request id.  The submission carries a key in its
metadata, so a submit activity retried after the batch was created finds that
batch instead of paying for a second one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import openai

from kernelopt.agents.quirks import Quirks
from kernelopt.agents.transport import Message, request_body
from kernelopt.contracts.search import ProposerConfig
from kernelopt.log import get_logger

log = get_logger(__name__)

ENDPOINT = "/v1/chat/completions"
KEY_FIELD = "kernelopt_key"
ENDED = ("completed", "failed", "expired", "cancelled")


@dataclass
class BatchState:
    status: str
    completions: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.status in ENDED


def jsonl(
    config: ProposerConfig, quirks: Quirks, requests: list[tuple[str, list[Message]]]
) -> bytes:
    """The batch input file: one chat-completion request per line."""
    lines = [
        json.dumps(
            {
                "custom_id": rid,
                "method": "POST",
                "url": ENDPOINT,
                "body": request_body(config, quirks, messages),
            }
        )
        for rid, messages in requests
    ]
    return ("\n".join(lines) + "\n").encode()


async def find_batch(client: openai.AsyncOpenAI, key: str) -> str | None:
    """A batch this submission already created (the newest page is enough)."""
    page = await client.batches.list(limit=100)
    for batch in page.data:
        if (batch.metadata or {}).get(KEY_FIELD) == key:
            return batch.id
    return None


async def submit(
    client: openai.AsyncOpenAI,
    config: ProposerConfig,
    quirks: Quirks,
    requests: list[tuple[str, list[Message]]],
    key: str,
) -> str:
    """Upload and create (or find) the batch; returns its id."""
    found = await find_batch(client, key)
    if found is not None:
        log.info("llm.batch_found", batch=found, key=key)
        return found
    data = jsonl(config, quirks, requests)
    uploaded = await client.files.create(
        file=("kernelopt-requests.jsonl", data, "application/jsonl"), purpose="batch"
    )
    batch = await client.batches.create(
        input_file_id=uploaded.id,
        endpoint=ENDPOINT,
        completion_window="24h",
        metadata={KEY_FIELD: key},
    )
    log.info("llm.batch_created", batch=batch.id, requests=len(requests), key=key)
    return batch.id


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def poll(client: openai.AsyncOpenAI, batch_id: str) -> BatchState:
    """The batch's status; once it ended, every line's completion or error."""
    batch = await client.batches.retrieve(batch_id)
    state = BatchState(status=str(batch.status))
    if not state.ended:
        return state
    if batch.output_file_id:
        content = await client.files.content(batch.output_file_id)
        for line in _lines(content.text):
            response = line.get("response") or {}
            if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                state.completions[line["custom_id"]] = response["body"]
            else:
                state.errors[line["custom_id"]] = json.dumps(response)[:400]
    if batch.error_file_id:
        content = await client.files.content(batch.error_file_id)
        for line in _lines(content.text):
            why = line.get("error") or (line.get("response") or {}).get("body") or line
            state.errors[line["custom_id"]] = json.dumps(why)[:400]
    return state


async def cancel(client: openai.AsyncOpenAI, batch_id: str) -> None:
    await client.batches.cancel(batch_id)
