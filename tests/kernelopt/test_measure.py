"""The one timing module (kernelopt.measure) and the gates' hold on it."""

from __future__ import annotations

import itertools

import pytest

from kernelopt import measure


def test_cpu_samples_respect_the_budgets_on_a_scripted_clock() -> None:
    ticks = itertools.count(0, 1_000_000)  # every read of the clock is 1 ms later
    calls = 0

    def fn() -> None:
        nonlocal calls
        calls += 1

    samples = measure.samples_ms(fn, cuda=False, warmup_ms=5, rep_ms=30, clock=lambda: next(ticks))
    assert samples and all(s == pytest.approx(1.0) for s in samples)  # one tick per call
    assert 9 <= len(samples) <= 11  # 30 ms of repetitions, three 1 ms clock reads per call
    assert calls > len(samples)  # the warm-up calls ran first and were not kept


def test_at_least_three_samples_even_when_one_call_outlasts_the_budget() -> None:
    ticks = itertools.count(0, 50_000_000)
    samples = measure.samples_ms(
        lambda: None, cuda=False, warmup_ms=1, rep_ms=1, clock=lambda: next(ticks)
    )
    assert len(samples) == measure.MIN_SAMPLES


def test_the_gpu_path_is_do_bench_with_every_sample() -> None:
    seen = {}

    def fake_do_bench(fn, *, warmup, rep, return_mode):
        seen.update(warmup=warmup, rep=rep, mode=return_mode)
        return [0.5, 0.25]

    out = measure.samples_ms(lambda: None, cuda=True, warmup_ms=7, rep_ms=9, do_bench=fake_do_bench)
    assert out == [0.5, 0.25] and seen == {"warmup": 7, "rep": 9, "mode": "all"}


def test_a_host_stopwatch_times_between_start_and_stop() -> None:
    ticks = iter([0, 3_000_000, 10_000_000, 12_500_000])
    watches = [measure.Stopwatch(cuda=False, clock=lambda: next(ticks)) for _ in range(2)]
    for w in watches:
        w.start()
        w.stop()
    assert measure.elapsed(watches) == [pytest.approx(3.0), pytest.approx(2.5)]


def test_replacing_the_shared_sampler_is_tampering_and_is_undone() -> None:
    import gates.timers as timers

    kit = timers.TimerKit("cpu")
    original = measure.samples_ms
    try:
        measure.samples_ms = lambda *a, **k: [0.0]  # type: ignore[assignment]
        timers.samples_ms = lambda *a, **k: [0.0]  # type: ignore[assignment]
        assert {"kernelopt.measure.samples_ms", "gates.timers.samples_ms"} <= set(kit.tampered())
        kit.restore()
        assert measure.samples_ms is original and timers.samples_ms is original
        assert kit.tampered() == []
    finally:
        measure.samples_ms = original
        timers.samples_ms = original
