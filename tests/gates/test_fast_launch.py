"""``fast_launch`` and ``forking_from`` give back the registration they replaced.

A zygote registered for a whole session (or by an outer block) must survive an
inner block on exit; when one did not, tests that ran later forked or spawned
depending on the order they ran in. The zygote and its probe are doubles here:
what is checked is the registry, not the processes (tests/gates/
test_isolation_primitives.py runs real ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import gates.runner
from gates.runner import fast_launch


class FakeZygote:
    """Stands for ``gates.zygote.Zygote``: starts at once, remembers being closed."""

    def __init__(self, env: dict[str, str], start_timeout_s: float = 0.0) -> None:
        self.closed = False

    @property
    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeProbe:
    ok: bool
    wall_s: float = 0.1

    def describe(self) -> str:
        return "ok" if self.ok else "crashed"


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[FakeZygote]:
    """Zygotes made by ``fast_launch`` from now on, in order; the registry starts empty."""
    made: list[FakeZygote] = []

    def make(env: dict[str, str], start_timeout_s: float = 0.0) -> FakeZygote:
        made.append(FakeZygote(env, start_timeout_s))
        return made[-1]

    monkeypatch.setattr(gates.runner, "Zygote", make)
    monkeypatch.setattr(gates.runner, "probe_zygote", lambda *a, **k: FakeProbe(True))
    monkeypatch.setattr(gates.runner, "_ZYGOTES", {})
    return made


def test_a_fast_launch_gives_back_the_zygote_it_replaced(fakes: list[FakeZygote]) -> None:
    outer = FakeZygote({})
    gates.runner._ZYGOTES["cpu"] = outer  # type: ignore[assignment]
    with fast_launch("cpu") as started:
        assert started and gates.runner._ZYGOTES["cpu"] is fakes[0]
    assert gates.runner._ZYGOTES["cpu"] is outer
    assert fakes[0].closed and not outer.closed


def test_nested_fast_launches_unwind_one_at_a_time(fakes: list[FakeZygote]) -> None:
    with fast_launch("cpu"):
        with fast_launch("cpu"):
            assert gates.runner._ZYGOTES["cpu"] is fakes[1]
        assert gates.runner._ZYGOTES["cpu"] is fakes[0] and not fakes[0].closed
        assert fakes[1].closed
    assert "cpu" not in gates.runner._ZYGOTES and fakes[0].closed


def test_an_error_in_the_block_still_gives_back_the_outer_zygote(
    fakes: list[FakeZygote],
) -> None:
    outer = FakeZygote({})
    gates.runner._ZYGOTES["cpu"] = outer  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="boom"), fast_launch("cpu"):
        raise RuntimeError("boom")
    assert gates.runner._ZYGOTES["cpu"] is outer and fakes[0].closed


def test_a_failed_probe_leaves_the_outer_zygote_in_place(
    fakes: list[FakeZygote], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gates.runner, "probe_zygote", lambda *a, **k: FakeProbe(False))
    outer = FakeZygote({})
    gates.runner._ZYGOTES["cpu"] = outer  # type: ignore[assignment]
    with fast_launch("cpu") as started:
        assert not started and "probe failed" in started.note
        assert gates.runner._ZYGOTES["cpu"] is outer
    assert gates.runner._ZYGOTES["cpu"] is outer and fakes[0].closed


def test_forking_from_none_spawns_within_and_restores_after(fakes: list[FakeZygote]) -> None:
    from gates.runner import forking_from

    outer = FakeZygote({})
    with forking_from("cpu", outer):  # type: ignore[arg-type]
        with forking_from("cpu", None):
            assert "cpu" not in gates.runner._ZYGOTES
        assert gates.runner._ZYGOTES["cpu"] is outer
    assert "cpu" not in gates.runner._ZYGOTES
