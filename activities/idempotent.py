"""GPU activities that return a stored result instead of running twice.

``memoized`` wraps a GPU activity under its own name: before the work, it looks
up the call's key (``kernelopt.idempotent``); after the work, it stores the
result before returning it, so the completion Temporal may lose (server down,
attempt timed out meanwhile) never costs the GPU a second run.  Failures are not
stored: a retried failure runs again, as it should.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from temporalio import activity

from kernelopt.idempotent import open_index, result_key
from kernelopt.log import get_logger

log = get_logger(__name__)


def memoized(fn: Callable[[Any], Awaitable[BaseModel]]) -> Callable[[Any], Awaitable[BaseModel]]:
    """The activity ``fn`` (one pydantic input, a pydantic result) made idempotent per call."""
    definition = activity._Definition.must_from_callable(fn)
    if getattr(fn, "__kernelopt_memoized__", False):
        return fn
    result_type = typing.get_type_hints(definition.fn)["return"]

    @functools.wraps(definition.fn, updated=())
    async def run(inp: BaseModel) -> BaseModel:
        info = activity.info()
        key = result_key(
            info.activity_type, (info.workflow_id, info.workflow_run_id, info.activity_id), inp
        )
        index = open_index()
        try:
            stored = index.get(key, result_type)
        except Exception as exc:  # an unreadable entry is a miss, never a failure
            log.warning("stored result unreadable; running again", key=key[:12], error=str(exc))
            stored = None
        if stored is not None:
            log.info(
                "returning the stored result of an earlier attempt",
                activity=info.activity_type,
                attempt=info.attempt,
                key=key[:12],
            )
            return stored
        result = await definition.fn(inp)
        index.put(key, result, f"{info.activity_type}-{key[:12]}.json")
        return result

    run.__kernelopt_memoized__ = True  # type: ignore[attr-defined]
    return activity.defn(name=definition.name)(run)
