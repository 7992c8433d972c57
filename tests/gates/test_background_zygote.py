"""``fast_launch_soon``: the zygote loads on a thread of its own while the caller works.

The registry doubles of tests/gates/test_fast_launch.py check what is registered when;
one test starts a real (sandboxed) CPU zygote and runs a job through it after ``ready()``.
"""

from __future__ import annotations

import threading
import time

import pytest

import gates.runner
from gates.background_zygote import fast_launch_soon
from gates.runner import probe_zygote
from tests.gates.test_fast_launch import FakeProbe, FakeZygote


@pytest.fixture
def slow_fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[FakeZygote], threading.Event]:
    """Fake zygotes whose start waits for the returned event; the registry starts empty."""
    made: list[FakeZygote] = []
    go = threading.Event()

    def make(env: dict[str, str], start_timeout_s: float = 0.0) -> FakeZygote:
        assert go.wait(10)
        made.append(FakeZygote(env, start_timeout_s))
        return made[-1]

    monkeypatch.setattr(gates.runner, "Zygote", make)
    monkeypatch.setattr(gates.runner, "probe_zygote", lambda *a, **k: FakeProbe(True))
    monkeypatch.setattr(gates.runner, "_ZYGOTES", {})
    return made, go


def test_the_caller_works_while_the_zygote_starts_and_jobs_fork_only_after_ready(
    slow_fakes: tuple[list[FakeZygote], threading.Event],
) -> None:
    made, go = slow_fakes
    with fast_launch_soon("cpu") as ready:
        # the block runs at once: the zygote is still starting, nothing is registered
        assert made == [] and "cpu" not in gates.runner._ZYGOTES
        go.set()
        info = ready()
        assert info and gates.runner._ZYGOTES["cpu"] is made[0]
        assert ready() is info and len(made) == 1  # registered once
        assert not made[0].closed
    assert made[0].closed and "cpu" not in gates.runner._ZYGOTES


def test_a_zygote_that_cannot_start_is_said_by_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise OSError("no bwrap here")

    monkeypatch.setattr(gates.runner, "Zygote", broken)
    monkeypatch.setattr(gates.runner, "_ZYGOTES", {})
    with fast_launch_soon("cpu") as ready, pytest.raises(OSError, match="no bwrap"):
        ready()
    assert "cpu" not in gates.runner._ZYGOTES


def test_a_real_zygote_started_on_its_own_thread_runs_jobs_after_ready(gates_env: object) -> None:
    """The sandbox ties the zygote to the thread that started it (``--die-with-parent``):
    that thread lives until the block ends, so the zygote still forks jobs afterwards."""
    with fast_launch_soon("cpu") as ready:
        info = ready()
        assert info, info.note
        zygote = gates.runner._ZYGOTES["cpu"]
        time.sleep(0.5)  # a zygote whose starting thread had ended would be gone by now
        assert zygote.alive and probe_zygote(zygote, "cpu", 60.0).ok
    assert "cpu" not in gates.runner._ZYGOTES or gates.runner._ZYGOTES["cpu"] is not zygote
    assert not zygote.alive  # closed with the block
