"""GPU activities that note the GPU's utilisation around their run (``kernelopt.gpu_busy``).

``sampled`` wraps a GPU activity under its own name, like ``memoized``: the
worker's sampler keeps running totals and the wrapper appends what they were at
the activity's start and end to its campaign's file, which the campaign report
reads.  A stored result returned by ``memoized`` does no GPU work, so ``sampled``
goes inside it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import activity

from kernelopt.gpu_busy import BusySampler, campaign_of


def sampled(
    fn: Callable[[Any], Awaitable[BaseModel]], sampler: BusySampler, home: Path
) -> Callable[[Any], Awaitable[BaseModel]]:
    """The activity ``fn`` with its GPU utilisation noted under ``home`` per campaign."""
    definition = activity._Definition.must_from_callable(fn)

    @functools.wraps(definition.fn, updated=())
    async def run(inp: BaseModel) -> BaseModel:
        info = activity.info()
        with sampler.window(campaign_of(info.workflow_id or ""), info.activity_type, home):
            return await definition.fn(inp)

    return activity.defn(name=definition.name)(run)
