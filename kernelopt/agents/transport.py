"""The one place that talks to an OpenAI-compatible endpoint.

``AsyncOpenAI(max_retries=0)``: Temporal owns retries (docs/architecture.md#retries), so
every attempt is visible in history.  Failures are sorted once, here:
endpoint problems that may pass (connection, timeout, 429, 5xx) are
``InfrastructureError`` (retryable); a wrong key, model or request is an
``LLMConfigError`` (deterministic: retrying for hours cannot fix it).  The API
key is read from the environment variable the config names; it never enters
workflow history.

Two request-shape adjustments are learned from the endpoint's own HTTP 400
(``max_completion_tokens`` instead of ``max_tokens``, no ``temperature``) and
remembered per endpoint+model (``kernelopt.agents.quirks``).  A reply cut at
the output limit (``finish_reason=length``) is sent back once as "truncated,
continue or shorten", and ``<think>`` blocks are stripped before the text is
handed to the parser.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import openai

from kernelopt.agents import quirks as quirk_store
from kernelopt.agents.chat import ChatReply, Message
from kernelopt.agents.ledger import usage_of
from kernelopt.contracts.search import ProposerConfig
from kernelopt.errors import ConfigError, InfrastructureError, LLMReplyError
from kernelopt.log import get_logger

log = get_logger(__name__)

# A truncated reply is sent back at most this often; the last text is returned as it is.
MAX_CONTINUATIONS = 1
TRUNCATED_NOTE = (
    "Your reply was cut off at the output limit ({limit} tokens). Continue exactly where it "
    "stopped, without repeating anything; or, if the answer cannot fit, reply again with a "
    "shorter complete answer."
)
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)
_FRESH_ANSWER = re.compile(r"\A\s*(?:(?:```|~~~)[ \t]*[A-Za-z][\w+-]*[ \t]*\n|\{)")


class LLMConfigError(ConfigError):
    """The endpoint refused the request itself (auth, unknown model, bad request)."""


def endpoint_label(config: ProposerConfig) -> str:
    """How reports name the LLM proposer: model and endpoint, never the key."""
    return f"llm:{config.model} @ {config.base_url or 'https://api.openai.com/v1'}"


def make_client(config: ProposerConfig) -> openai.AsyncOpenAI:
    key = os.environ.get(config.api_key_env, "")
    if not key:
        if config.base_url is None:
            raise LLMConfigError(
                f"no API key: set ${config.api_key_env} or configure a base URL of a local "
                "OpenAI-compatible server"
            )
        key = "unused"  # local servers (vLLM, SGLang, Ollama) accept any key
    return openai.AsyncOpenAI(
        api_key=key,
        base_url=config.base_url,
        max_retries=0,
        timeout=config.request_timeout_s,
    )


def strip_think(text: str) -> str:
    """Remove reasoning models' ``<think>...</think>`` blocks (and one left open at the end)."""
    out = _THINK.sub("", text)
    return _OPEN_THINK.sub("", out).strip() if "<think>" in out.lower() else out


def request_body(
    config: ProposerConfig, quirks: quirk_store.Quirks, messages: list[Message]
) -> dict[str, Any]:
    """The chat-completion request as this endpoint+model accepts it (also a batch line's body)."""
    body: dict[str, Any] = {"model": config.model, "messages": messages}
    if not quirks.no_temperature:
        body["temperature"] = config.temperature
    limit_name = "max_completion_tokens" if quirks.max_completion_tokens else "max_tokens"
    body[limit_name] = config.max_output_tokens
    return body


def reply_from(config: ProposerConfig, response: Any) -> ChatReply:
    """A ChatReply from a completion object (the client's, or one a batch file carried)."""
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise LLMReplyError("the endpoint returned no choices")
    choice = choices[0]
    text = getattr(choice.message, "content", None) or ""
    return ChatReply(
        text=strip_think(text),
        usage=usage_of(config, getattr(response, "usage", None)),
        model=str(getattr(response, "model", "") or ""),
        finish_reason=str(getattr(choice, "finish_reason", "") or ""),
    )


def join_continuation(partial: str, more: str) -> str:
    """A truncated reply plus its continuation; a fresh (shortened) answer replaces it."""
    if _FRESH_ANSWER.match(more):
        return more
    return partial + more


def sorted_status_error(exc: openai.APIStatusError) -> Exception:
    """Retryable (5xx, 408/409/429) or a deterministic configuration error."""
    if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
        return InfrastructureError(f"LLM endpoint error {exc.status_code}: {exc.message}")
    return LLMConfigError(f"LLM endpoint refused the request ({exc.status_code}): {exc.message}")


def _home() -> Path:
    from kernelopt.config import Settings

    return Settings.from_env().home


class ChatTransport:
    """Chat completions with usage, cost, typed failures and learned request shapes."""

    def __init__(
        self,
        config: ProposerConfig,
        client: openai.AsyncOpenAI | None = None,
        home: Path | None = None,
    ) -> None:
        self.config = config
        self._client = client
        self.home = home if home is not None else _home()
        self.key = quirk_store.key_of(config.base_url, config.model)

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = make_client(self.config)
        return self._client

    @property
    def quirks(self) -> quirk_store.Quirks:
        return quirk_store.lookup(self.home, self.key)

    async def complete(self, messages: list[Message]) -> ChatReply:
        reply = await self._once(messages)
        text, usage = reply.text, reply.usage
        for _ in range(MAX_CONTINUATIONS):
            if reply.finish_reason != "length":
                break
            log.info("llm.truncated", model=self.config.model, chars=len(reply.text))
            note = TRUNCATED_NOTE.format(limit=self.config.max_output_tokens)
            follow = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": note},
            ]
            reply = await self._once(follow)
            text, usage = join_continuation(text, reply.text), usage.plus(reply.usage)
        return reply.model_copy(update={"text": text, "usage": usage})

    async def _once(self, messages: list[Message]) -> ChatReply:
        """One completion; a 400 naming a parameter we can adjust is learned and retried."""
        for _ in range(3):  # at most one adjustment per learnable parameter, plus the last try
            current = self.quirks
            body = request_body(self.config, current, messages)
            try:
                response = await self.client.chat.completions.create(**body)
            except (openai.APIConnectionError, openai.RateLimitError) as exc:
                raise InfrastructureError(f"LLM endpoint unavailable: {exc}") from exc
            except openai.APIStatusError as exc:
                learned = quirk_store.learn(current, exc.status_code, str(exc.message))
                if learned is None:
                    raise sorted_status_error(exc) from exc
                quirk_store.remember(self.home, self.key, learned)
                continue
            except openai.APIResponseValidationError as exc:
                raise InfrastructureError(f"LLM endpoint sent an invalid response: {exc}") from exc
            return reply_from(self.config, response)
        raise LLMConfigError("the endpoint kept refusing the request's parameters")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
