"""The timing child's settling step, with a scripted clock and timer."""

from __future__ import annotations

from gates.jobs.timing import _SETTLE_MAX_S, WallSizedSteps, settle, step_calls


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


class CallClock:
    """A checked loop whose calls each take ``wall_ms`` of fake wall time; each step's
    samples are the next scripted GPU time (the last one repeats)."""

    def __init__(self, gpu_ms: list[float], wall_ms: float) -> None:
        self.gpu_ms, self.wall_ms = list(gpu_ms), wall_ms
        self.t_ns = 0
        self.calls = 0

    def now_ns(self) -> int:
        return self.t_ns

    def timed(self, n: int) -> list[float]:
        self.calls += n
        self.t_ns += int(n * self.wall_ms * 1e6)
        value = self.gpu_ms.pop(0) if len(self.gpu_ms) > 1 else self.gpu_ms[0]
        return [value] * n


def _settle_wall_s(clock: CallClock, cap_ms: float) -> tuple[list[float], WallSizedSteps]:
    # as the timing child does: three calls estimate, then steps sized from them
    t0 = clock.now_ns()
    estimate = clock.timed(3)[0]
    wall = (clock.now_ns() - t0) / 1e6 / 3
    steps = WallSizedSteps(
        clock, clock.timed, step_calls(estimate, wall, cap_ms, 1000), cap_ms, 1000
    )
    return settle(clock, steps), steps


def test_a_tiny_forward_settles_in_bounded_wall_time_with_the_cap() -> None:
    # H200: a ~20 us forward's checked call costs ~0.35 ms of wall (flush, spin, checks)
    uncapped = CallClock([0.021], wall_ms=0.35)
    steps, sized = _settle_wall_s(uncapped, cap_ms=0.0)
    assert len(steps) == 3 and sized.sizes == [1000, 1000, 1000]
    assert uncapped.t_ns / 1e9 > 1.0  # the 1.17 s per side measured on the H200
    capped = CallClock([0.021], wall_ms=0.35)
    steps, sized = _settle_wall_s(capped, cap_ms=50.0)
    assert len(steps) == 3 and sized.sizes == [143, 143, 143]
    assert capped.t_ns / 1e9 < 0.16


def test_the_cap_leaves_a_slow_forwards_steps_alone() -> None:
    # 10 ms of GPU work per call: 25 ms of GPU time is three calls, under any cap
    assert step_calls(10.0, 10.4, 50.0, 1000) == step_calls(10.0, 10.4, 0.0, 1000) == 3
    assert step_calls(0.021, 0.35, 1.0, 1000) == 3  # never fewer than three calls


def test_capped_steps_still_wait_out_a_slow_start() -> None:
    # the same ramp as above: three agreeing steps are still needed, whatever their size
    clock = CallClock([0.0568, 0.0486, 0.0502, 0.0233, 0.0227, 0.0226, 0.0233], wall_ms=0.35)
    steps, _ = _settle_wall_s(clock, cap_ms=50.0)
    assert steps == [0.0486, 0.0502, 0.0233, 0.0227, 0.0226]


def test_a_capped_forward_that_never_settles_is_still_bounded() -> None:
    clock = CallClock([0.02 if i % 2 else 0.04 for i in range(100_000)], wall_ms=0.35)
    steps, _ = _settle_wall_s(clock, cap_ms=50.0)
    assert len(steps) > 3
    assert clock.t_ns / 1e9 < _SETTLE_MAX_S + 0.1
