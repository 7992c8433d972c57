"""What an endpoint+model refuses, learned from its HTTP 400s and remembered.

Reasoning models reject ``max_tokens`` (they want ``max_completion_tokens``)
and some reject any ``temperature`` but the default.  The transport learns
each from the endpoint's own error once; this module keeps what it learned
in memory and in ``$KERNELOPT_HOME/llm/endpoint-quirks.json``, so a restarted
worker does not pay the failed request again.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from pydantic import BaseModel

from kernelopt.log import get_logger

log = get_logger(__name__)

QUIRKS_FILE = "endpoint-quirks.json"
_LOCK = threading.Lock()
_MEMORY: dict[str, Quirks] = {}


class Quirks(BaseModel):
    """Request-shape adjustments one endpoint+model needs."""

    max_completion_tokens: bool = False  # send the output limit under this name
    no_temperature: bool = False  # leave temperature out (only the default is accepted)


def key_of(base_url: str | None, model: str) -> str:
    return f"{base_url or 'https://api.openai.com/v1'}|{model}"


def quirks_path(home: Path) -> Path:
    return home / "llm" / QUIRKS_FILE


def _read(path: Path) -> dict[str, Quirks]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Quirks] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out[key] = Quirks.model_validate(value)
    return out


def lookup(home: Path | None, key: str) -> Quirks:
    """What we know about ``key``: memory first, then the file under ``home``."""
    with _LOCK:
        if key in _MEMORY:
            return _MEMORY[key]
        if home is not None:
            found = _read(quirks_path(home)).get(key)
            if found is not None:
                _MEMORY[key] = found
                return found
    return Quirks()


def remember(home: Path | None, key: str, quirks: Quirks) -> None:
    """Keep ``quirks`` for ``key`` in memory and (atomically) on disk."""
    with _LOCK:
        _MEMORY[key] = quirks
        if home is None:
            return
        path = quirks_path(home)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {k: v.model_dump() for k, v in _read(path).items()}
            data[key] = quirks.model_dump()
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(path)
        except OSError as exc:  # memory still has it; the next worker learns it again
            log.warning("llm.quirks_not_saved", path=str(path), error=str(exc))
    log.info("llm.endpoint_quirks", endpoint=key, **quirks.model_dump())


def forget_memory() -> None:
    """Drop the in-memory copy (tests: behave like a freshly started worker)."""
    with _LOCK:
        _MEMORY.clear()


def _names(message: str, param: str) -> bool:
    return re.search(rf"['\"`]?\b{re.escape(param)}\b['\"`]?", message) is not None


def learn(current: Quirks, status: int, message: str) -> Quirks | None:
    """The quirks a 400 error asks for, or None when it is not about these parameters."""
    if status != 400:
        return None
    text = message.lower()
    if (
        not current.max_completion_tokens
        and _names(text, "max_tokens")
        and ("max_completion_tokens" in text or "unsupported" in text or "not supported" in text)
    ):
        return current.model_copy(update={"max_completion_tokens": True})
    if not current.no_temperature and _names(text, "temperature"):
        return current.model_copy(update={"no_temperature": True})
    return None
