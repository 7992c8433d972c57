"""Every CPU call site has a heartbeat timeout, and every CPU activity heartbeats while it works.

A call site with a heartbeat timeout whose activity never heartbeats would be
killed after 30 s of healthy work; one without a timeout waits out its
start-to-close timeout when the worker dies.  Both halves are checked here.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from temporalio.testing import ActivityEnvironment

import workflows.activity_options as opts
from activities import cpu_activities
from activities.heartbeat import heartbeating, in_thread

CPU_CALL_SITES = ("SEGMENT", "LLM", "BUILTIN", "REPORT")


def test_cpu_call_sites_have_a_heartbeat_timeout_of_at_most_a_minute() -> None:
    for name in CPU_CALL_SITES:
        options = getattr(opts, name)
        assert options.heartbeat is not None, name
        assert options.heartbeat.total_seconds() <= 60, name
        assert "heartbeat_timeout" in options.kwargs(), name


def test_every_cpu_activity_runs_its_body_under_heartbeats() -> None:
    for fn in cpu_activities():
        source = inspect.getsource(fn)
        # in_thread and in_thread_final both run the body under heartbeating
        assert "heartbeat" in source or "in_thread(" in source or "in_thread_final(" in source, (
            fn.__name__
        )


async def test_a_body_in_a_thread_heartbeats_while_it_runs() -> None:
    beats: list[float] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    async def activity_body() -> str:
        return await in_thread(lambda: time.sleep(0.55) or "done")

    async def patched() -> str:
        async with heartbeating(every_s=0.1):
            return await asyncio.to_thread(lambda: time.sleep(0.55) or "done")

    assert await env.run(patched) == "done"
    assert len(beats) >= 5, beats  # one right away, then every 0.1 s of the 0.55 s
    beats.clear()
    assert await env.run(activity_body) == "done"
    assert len(beats) >= 1  # the default 5-s period: at least the first beat


async def test_heartbeats_stop_with_the_body() -> None:
    beats: list[float] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    async def body() -> None:
        async with heartbeating(every_s=0.05):
            await asyncio.sleep(0.2)
        count = len(beats)
        await asyncio.sleep(0.2)
        assert len(beats) == count, "a heartbeat after the body ended"

    await env.run(body)
