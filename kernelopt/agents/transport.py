"""The one place that talks to an OpenAI-compatible endpoint.

``AsyncOpenAI(max_retries=0)``: Temporal owns retries (DESIGN.md rule 7), so
every attempt is visible in history.  Failures are sorted once, here:
endpoint problems that may pass (connection, timeout, 429, 5xx) are
``InfrastructureError`` (retryable); a wrong key, model or request is an
``LLMConfigError`` (deterministic: retrying for hours cannot fix it).  The API
key is read from the environment variable the config names; it never enters
workflow history.
"""

from __future__ import annotations

import os
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict

from kernelopt.agents.ledger import usage_of
from kernelopt.contracts.search import ProposerConfig, Usage
from kernelopt.errors import ConfigError, InfrastructureError, LLMReplyError

Message = dict[str, str]


class LLMConfigError(ConfigError):
    """The endpoint refused the request itself (auth, unknown model, bad request)."""


class ChatReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage
    model: str = ""
    finish_reason: str = ""


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


class ChatTransport:
    """Chat completions with usage, cost and typed failures."""

    def __init__(self, config: ProposerConfig, client: openai.AsyncOpenAI | None = None) -> None:
        self.config = config
        self._client = client

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = make_client(self.config)
        return self._client

    async def complete(self, messages: list[Message]) -> ChatReply:
        try:
            response = await self.client.chat.completions.create(
                model=self.config.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=self.config.temperature,
                max_tokens=self.config.max_output_tokens,
            )
        except (openai.APIConnectionError, openai.RateLimitError) as exc:
            raise InfrastructureError(f"LLM endpoint unavailable: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
                raise InfrastructureError(
                    f"LLM endpoint error {exc.status_code}: {exc.message}"
                ) from exc
            raise LLMConfigError(
                f"LLM endpoint refused the request ({exc.status_code}): {exc.message}"
            ) from exc
        except openai.APIResponseValidationError as exc:
            raise InfrastructureError(f"LLM endpoint sent an invalid response: {exc}") from exc
        return self._reply(response)

    def _reply(self, response: Any) -> ChatReply:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMReplyError("the endpoint returned no choices")
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        return ChatReply(
            text=text,
            usage=usage_of(self.config, getattr(response, "usage", None)),
            model=str(getattr(response, "model", "") or ""),
            finish_reason=str(getattr(choice, "finish_reason", "") or ""),
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
