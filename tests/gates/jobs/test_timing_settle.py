"""The timing child's settling step, with a scripted clock and timer."""

from __future__ import annotations

from gates.jobs.timing import _SETTLE_MAX_S, settle


class ScriptedKit:
    """Returns one scripted median per short checked timing; each takes 25 ms of fake time."""

    def __init__(self, medians: list[float]) -> None:
        self.medians = list(medians)
        self.t_ns = 0
        self.calls = 0

    def now_ns(self) -> int:
        return self.t_ns

    def chunk(self) -> list[float]:
        self.calls += 1
        self.t_ns += int(25 * 1e6)
        value = self.medians.pop(0) if self.medians else 0.023
        return [value, value, value]


def test_waits_out_a_slow_start_seen_on_the_h200() -> None:
    # the compiled forward's first do_bench runs in a fresh process: 50-57 us, then ~23 us
    kit = ScriptedKit([0.0568, 0.0486, 0.0502, 0.0233, 0.0227, 0.0226, 0.0233])
    steps = settle(kit, kit.chunk)
    assert steps == [0.0568, 0.0486, 0.0502, 0.0233, 0.0227, 0.0226]


def test_a_steady_forward_costs_three_short_timings() -> None:
    kit = ScriptedKit([0.0210, 0.0212, 0.0211])
    assert len(settle(kit, kit.chunk)) == 3 and kit.calls == 3


def test_a_forward_that_never_settles_is_bounded() -> None:
    kit = ScriptedKit([0.02 if i % 2 else 0.04 for i in range(10_000)])
    steps = settle(kit, kit.chunk)
    assert len(steps) == int(_SETTLE_MAX_S * 1000 / 25)
