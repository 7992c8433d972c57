"""A GPU worker's next supervised child starts while the current activity runs."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities import spare_child
from activities.supervise import run_supervised
from tests.support.paths import ROOT
from tests.support.timed_probe import NapIn, WhoOut

ENV = {"PYTHONPATH": str(ROOT)}
WHOAMI = "tests.support.timed_probe:whoami"


@pytest.fixture
def spares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    spare_child.enable()
    yield
    spare_child.disable()


@pytest.fixture
def light_spares(spares: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spares that import only the job's module: tests of which child serves which
    activity need no torch in each of them (the first test checks the real list)."""
    monkeypatch.setattr(spare_child, "preload_for", spare_child.job_module)


async def _gone(pid: int) -> bool:
    for _ in range(200):  # SIGKILL is asynchronous
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_the_next_activity_runs_in_the_child_started_during_this_one(spares) -> None:
    first = await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    assert first.preloaded == ""  # nothing was started ahead of the first one
    waiting = spare_child.waiting()
    assert len(waiting) == spare_child.POOL == 2
    second = await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    assert second.pid == waiting[0] != first.pid
    assert second.preloaded.startswith("torch,") and second.preloaded.endswith(
        ",tests.support.timed_probe"
    )
    assert second.wrapper_runtime and not first.wrapper_runtime  # imported while it waited


async def test_back_to_back_activities_both_find_a_spare_started_before_either(
    light_spares,
) -> None:
    """Screening then gating at once: the gate's child was started before screening began,
    not when it began (one spare was still importing when the gate asked for it)."""
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    before = spare_child.waiting()
    screen = await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    gate = await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    assert [screen.pid, gate.pid] == before
    assert screen.preloaded and gate.preloaded


async def test_a_worker_with_two_slots_keeps_two_spares_a_slot(light_spares) -> None:
    """Two slots start activities side by side: on the H100 a third activity that came while
    both spares were taken found the next one still importing (process_start 4.5-8.8 s)."""
    spare_child.enable(slots=2)
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    waiting = spare_child.waiting()
    assert len(waiting) == 2 * spare_child.POOL
    first, second, third = await asyncio.gather(
        *(run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV) for _ in range(3))
    )
    assert {first.pid, second.pid, third.pid} <= set(waiting)
    assert first.preloaded and second.preloaded and third.preloaded


async def test_a_spare_started_for_other_settings_is_not_used_and_is_killed(light_spares) -> None:
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    stale = spare_child.waiting()
    assert stale
    other = await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env={**ENV, "X": "1"})
    assert other.pid not in stale and other.preloaded == ""
    for pid in stale:
        assert await _gone(pid)


async def test_a_retry_in_a_spare_still_gets_the_last_attempts_progress(light_spares) -> None:
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[{"step": "x"}, 1.0])

    @activity.defn(name="whoami")
    async def whoami_activity() -> WhoOut:
        return await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)

    out = await env.run(whoami_activity)
    assert out.preloaded and out.resume == {"step": "x"}


async def test_without_spares_no_process_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    spare_child.disable()
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    assert spare_child.waiting() == []


async def test_disabling_kills_the_waiting_spare(spares) -> None:
    await run_supervised(WHOAMI, NapIn(seconds=0), WhoOut, env=ENV)
    pids = spare_child.waiting()
    assert pids
    spare_child.disable()
    for pid in pids:
        assert await _gone(pid)


def test_the_spare_child_setting_defaults_on_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelopt.config import Settings

    assert Settings().spare_child
    monkeypatch.setenv("KERNELOPT_SPARE_CHILD", "0")
    assert not Settings.from_env().spare_child


@pytest.mark.gpu
def test_preloading_the_wrapper_runtime_creates_no_cuda_context() -> None:
    """A spare's imports must not touch the GPU: a gate parent would hold a context for nothing."""
    import subprocess
    import sys

    modules = ",".join(spare_child.WRAPPER_RUNTIME)
    code = (
        "import importlib, torch\n"
        f"for name in {modules!r}.split(','):\n"
        "    importlib.import_module(name)\n"
        "assert torch.cuda.is_available()\n"
        "print(torch.cuda.is_initialized())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
