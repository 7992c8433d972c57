"""GPU-second budgets charge what the activity wrapper measured, not what the child says."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.supervise import run_supervised
from tests.support.lost_attempts import cut_by_shutdown, retry_environment
from tests.support.paths import ROOT
from tests.support.timed_probe import LeftoverIn, LeftoverOut, NapIn, NapOut, StagedOut


async def test_the_wrapper_sets_device_seconds_over_the_childs_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    out = await run_supervised(
        "tests.support.timed_probe:nap", NapIn(seconds=0.6), NapOut, env={"PYTHONPATH": str(ROOT)}
    )
    assert out.napped == 0.6
    assert out.device_seconds is not None and out.device_seconds >= 0.6


async def test_a_failed_child_says_how_long_it_held_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed step is charged its run time (``workflows.machine_loss``): its failure says it."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    with pytest.raises(ApplicationError) as failed:
        await run_supervised(
            "tests.support.timed_probe:nap_then_fail",
            NapIn(seconds=0.6),
            NapOut,
            env={"PYTHONPATH": str(ROOT)},
        )
    assert failed.value.type == "RuntimeError" and "failed after 0.6 s" in failed.value.message
    assert 0.6 <= failed.value.details[0] < 60.0


def _supervised_nap(seconds: float) -> Callable[[], Awaitable[NapOut]]:
    """An activity that supervises a child napping ``seconds`` and heartbeats often."""

    @activity.defn(name="nap")
    async def nap_activity() -> NapOut:
        return await run_supervised(
            "tests.support.timed_probe:nap",
            NapIn(seconds=seconds),
            NapOut,
            heartbeat_every=0.2,
            env={"PYTHONPATH": str(ROOT)},
        )

    return nap_activity


async def test_a_retry_charges_the_lost_attempts_run_time_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU worker killed 40 s into an activity: the retry's charge includes those 40 s."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    env, beats = retry_environment(40.0, {"step": "x"})
    out = await env.run(_supervised_nap(0.6))
    assert out.device_seconds is not None and 40.6 <= out.device_seconds < 60.0
    # heartbeats carry the checkpoint detail and the run time so far, earlier attempts included
    assert beats and all(b[0] == {"step": "x"} and b[1] >= 40.0 for b in beats)


async def test_a_staged_result_gets_the_childs_own_start_up_in_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow gate says how much of it was the supervised process starting, not the gates."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    out = await run_supervised(
        "tests.support.timed_probe:staged",
        NapIn(seconds=0.2),
        StagedOut,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert list(out.stage_seconds) == ["process_start", "import_target", "work", "process_exit"]
    # an interpreter start with our imports is never free, and never minutes here
    assert 0 < out.stage_seconds["process_start"] < 120
    assert out.stage_seconds["import_target"] >= 0


async def test_a_finished_child_skips_teardown_and_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the result is written the child leaves at once (on the H200, triage ran ~10 s
    past its stages), and what its process group started does not outlive it."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    marker = tmp_path / "teardown"
    out = await run_supervised(
        "tests.support.timed_probe:leaves_a_daemon",
        LeftoverIn(marker=str(marker)),
        LeftoverOut,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert not marker.exists()  # interpreter teardown (atexit) was skipped
    assert out.stage_seconds["process_exit"] >= 0
    with pytest.raises(ProcessLookupError):
        for _ in range(200):  # SIGKILL is asynchronous; the zombie is reaped by init
            os.kill(out.daemon_pid, 0)
            await asyncio.sleep(0.05)


async def test_a_child_cut_by_the_worker_shutdown_reports_the_time_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step is issued again after its machine is lost; this is what it is charged."""
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    env, _ = retry_environment(40.0, {"step": "x"})
    failure = await cut_by_shutdown(env, _supervised_nap(30.0), after_s=1.0)
    assert failure.type == "WorkerShutdown"
    assert 40.5 <= failure.details[0] < 60.0  # this attempt held it about a second
