"""An activity environment as a retry after a lost attempt sees it, and a worker shutdown
in the middle of a run: what the held-time tests of activities share."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment


def retry_environment(earlier_s: float, detail: Any = None) -> tuple[ActivityEnvironment, list]:
    """Attempt 2, whose last heartbeat said ``detail`` after ``earlier_s`` held; the
    heartbeats this attempt sends are collected in the returned list."""
    env = ActivityEnvironment()
    beats: list[tuple] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[detail, earlier_s])
    return env, beats


async def cut_by_shutdown(
    env: ActivityEnvironment, fn: Callable[..., Any], *args: Any, after_s: float
) -> ApplicationError:
    """Run ``fn``, shut the worker down ``after_s`` in, and return the failure it raised."""

    async def shut_down_soon() -> None:
        await asyncio.sleep(after_s)
        env.worker_shutdown()
        env.cancel()

    stopper = asyncio.create_task(shut_down_soon())
    with pytest.raises(ApplicationError) as caught:
        await env.run(fn, *args)
    await stopper
    return caught.value
