"""Per-statement CUDA-event timing of a wrapper: triage's fallback when the profiler sees nothing.

Every launch and library call of the baseline wrapper is bracketed by a CUDA
event pair (``_ko_timer.start(i)`` / ``_ko_timer.stop(i)``), and the pairs are summed
per statement over several forwards.
"""

from __future__ import annotations

from typing import Any

from kernelopt.compile.wrapper_parse import parse_wrapper
from kernelopt.contracts.compiled import CompileResult
from kernelopt.measure import Stopwatch, elapsed
from kernelopt.store import ArtifactStore

TIMER_LINE = "_ko_timer = __import__('kernelopt.compile.statement_timing', fromlist=['EventTimer']).EventTimer()\n"


def instrument_timers(source: str) -> tuple[str, list[tuple[str, bool]]]:
    """The wrapper with CUDA events around every launch and library call.

    Returns the text and, per event index, (name, is_library).  The fallback
    for triage when the profiler records no kernels: each statement becomes
    ``_ko_timer.start(i); <statement>; _ko_timer.stop(i)`` on its own line(s).
    """
    parsed = parse_wrapper(source)
    data = source.encode("utf-8")
    labels: list[tuple[str, bool]] = []
    edits: list[tuple[int, int, str]] = []
    for i, event in enumerate(parsed.events):
        labels.append((event.name, event.kind == "library"))
        edits.append(
            (
                event.span.start,
                event.span.end,
                f"_ko_timer.start({i}); {event.text}; _ko_timer.stop({i})",
            )
        )
    anchor = parsed.wait_span.start if parsed.wait_span else 0
    edits.append((anchor, anchor, TIMER_LINE))
    for start, end, text in sorted(edits, key=lambda e: e[0], reverse=True):
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8"), labels


class EventTimer:
    """CUDA event pairs around wrapper statements, summed per statement index."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, Stopwatch]] = []
        self.active = False
        self._open: dict[int, Stopwatch] = {}

    def start(self, i: int) -> None:
        """Open statement ``i``'s event pair (only while timing is active)."""
        if self.active:
            watch = Stopwatch(cuda=True)
            watch.start()
            self._open[i] = watch

    def stop(self, i: int) -> None:
        """Close statement ``i``'s pair; its time is read once, after the last forward."""
        if self.active and i in self._open:
            watch = self._open.pop(i)
            watch.stop()
            self.pairs.append((i, watch))

    def totals_ms(self) -> dict[int, float]:
        out: dict[int, float] = {}
        for (i, _), ms in zip(self.pairs, elapsed([w for _, w in self.pairs]), strict=True):
            out[i] = out.get(i, 0.0) + ms
        return out


def event_times(
    compiled: CompileResult, store: ArtifactStore, args: list[Any], iters: int = 10
) -> dict[str, tuple[float, int, bool]]:
    """name -> (ms per forward, launches per forward, is_library), timed with CUDA events."""
    from kernelopt.compile.runtime import load_wrapper_module, pin_configs, run_call

    text, labels = instrument_timers(store.get_text(compiled.wrapper))
    module = load_wrapper_module(text, f"{compiled.problem.name}_timers")
    pin_configs(module, dict(compiled.kernel_configs))
    timer: EventTimer = module._ko_timer
    for _ in range(3):
        run_call(module, args)
    timer.pairs.clear()
    timer.active = True
    for _ in range(iters):
        run_call(module, args)
    timer.active = False
    totals = timer.totals_ms()
    out: dict[str, tuple[float, int, bool]] = {}
    for i, (name, is_lib) in enumerate(labels):
        ms, count, _ = out.get(name, (0.0, 0, is_lib))
        out[name] = (ms + totals.get(i, 0.0) / iters, count + 1, is_lib)
    return out
