"""One way to time code: a ``do_bench``-style sampler and one start/stop pair.

Triage, the compile step, profiling, screening and the gates all measure with
these, so their numbers mean the same thing (docs/method.md, "Gates"): on a GPU,
``triton.testing.do_bench`` samples (L2 flushed before every call, 25 ms of
warm-up, 100 ms of repetitions by default) and CUDA events; on the CPU, the host
clock over back-to-back calls with the same budgets.  Callers that must not
trust module attributes a candidate could replace (the gates' timing child)
pass the functions they captured before importing candidate code.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

WARMUP_MS = 25.0
REP_MS = 100.0
MIN_SAMPLES = 3

Clock = Callable[[], int]  # nanoseconds


def samples_ms(
    fn: Callable[[], Any],
    *,
    cuda: bool,
    warmup_ms: float = WARMUP_MS,
    rep_ms: float = REP_MS,
    do_bench: Callable[..., Any] | None = None,
    clock: Clock = time.perf_counter_ns,
) -> list[float]:
    """Per-call times of ``fn`` in ms: do_bench's samples on a GPU, host samples otherwise."""
    if cuda:
        if do_bench is None:
            from triton.testing import do_bench
        samples = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        return [float(s) for s in samples]
    deadline = clock() + int(warmup_ms * 1e6)
    fn()
    while clock() < deadline:
        fn()
    out: list[float] = []
    end = clock() + int(rep_ms * 1e6)
    while clock() < end or len(out) < MIN_SAMPLES:
        t0 = clock()
        fn()
        out.append((clock() - t0) / 1e6)
    return out


def median_ms(
    fn: Callable[[], Any],
    *,
    cuda: bool = True,
    warmup_ms: float = WARMUP_MS,
    rep_ms: float = REP_MS,
) -> float:
    """The median of ``samples_ms``: the number triage and the compile step report."""
    return float(statistics.median(samples_ms(fn, cuda=cuda, warmup_ms=warmup_ms, rep_ms=rep_ms)))


class Stopwatch:
    """A start/stop pair on the device's clock: CUDA events on a GPU, the host clock otherwise.

    ``ms()`` reads an event pair only after the device has synchronised, which the
    caller does once for many stopwatches (``elapsed``).
    """

    def __init__(self, cuda: bool, event_cls: Any = None, clock: Clock = time.perf_counter_ns):
        self.cuda = cuda
        self._clock = clock
        if cuda:
            if event_cls is None:
                import torch

                event_cls = torch.cuda.Event
            self._start, self._end = event_cls(enable_timing=True), event_cls(enable_timing=True)
        self._t0 = self._t1 = 0

    def start(self) -> None:
        if self.cuda:
            self._start.record()
        else:
            self._t0 = self._clock()

    def stop(self) -> None:
        if self.cuda:
            self._end.record()
        else:
            self._t1 = self._clock()

    def ms(self) -> float:
        if self.cuda:
            return float(self._start.elapsed_time(self._end))
        return (self._t1 - self._t0) / 1e6


def elapsed(watches: list[Stopwatch]) -> list[float]:
    """Each stopwatch's ms, after one device-wide synchronisation."""
    if any(w.cuda for w in watches):
        import torch

        torch.cuda.synchronize()
    return [w.ms() for w in watches]
