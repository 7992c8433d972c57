"""Token and cost accounting: per call (a Usage) and per role / campaign (sums).

Prices come from ``ProposerConfig`` (USD per million input / output tokens)
because endpoints differ (OpenAI, a local vLLM at zero cost, ...).  The
workflow keeps the per-call ``LedgerEntry`` list in its state; these helpers
compute and summarise it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernelopt.contracts.search import LedgerEntry, ProposerConfig, Usage


def cost_usd(config: ProposerConfig, prompt_tokens: int, completion_tokens: int) -> float:
    return (
        prompt_tokens * config.usd_per_mtok_in + completion_tokens * config.usd_per_mtok_out
    ) / 1_000_000


def usage_of(config: ProposerConfig, raw_usage: Any) -> Usage:
    """A Usage from an OpenAI ``usage`` object (or None: a server that reports nothing)."""
    prompt = int(getattr(raw_usage, "prompt_tokens", 0) or 0) if raw_usage is not None else 0
    completion = (
        int(getattr(raw_usage, "completion_tokens", 0) or 0) if raw_usage is not None else 0
    )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        usd=cost_usd(config, prompt, completion),
        calls=1,
    )


def total(usages: Iterable[Usage]) -> Usage:
    out = Usage()
    for usage in usages:
        out = out.plus(usage)
    return out


def by_role(entries: Iterable[LedgerEntry]) -> dict[str, Usage]:
    """Sums per role (planner / executor / retry_fix / summarizer), for reports."""
    sums: dict[str, Usage] = {}
    for entry in entries:
        usage = Usage(
            prompt_tokens=entry.prompt_tokens,
            completion_tokens=entry.completion_tokens,
            usd=entry.usd,
            calls=1,
        )
        sums[entry.role] = sums.get(entry.role, Usage()).plus(usage)
    return sums
