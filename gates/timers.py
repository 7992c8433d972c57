"""Timers the candidate cannot patch: captured before any candidate code is imported.

The timing child imports this module first.  ``TimerKit()`` then

* keeps private references to the clock and synchronisation builtins
  (``time.perf_counter_ns``, ``torch._C._cuda_synchronize``) and to
  ``triton.testing.do_bench`` -- replacing a module attribute later does not
  change what these references call;
* snapshots every attribute a timer cheat would replace (do_bench, the
  ``torch.cuda.Event`` class and its methods, the synchronise functions, the
  time functions, Triton's active driver), and the values of the backend
  switches that make library calls faster (TF32, cuDNN's benchmark mode), so
  ``tampered()`` names anything the candidate swapped and ``restore()`` puts
  the originals back before timing: the numbers are honest and the tampering
  is still reported.

The host timer runs a batch of calls between two device-wide synchronisations,
so work on any stream is inside the window; it cross-checks ``do_bench``'s
CUDA events, which only see the current stream.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from gates.harness_watch import HarnessWatch, RecordGuard
from kernelopt import measure
from kernelopt.measure import samples_ms

_perf_counter_ns = time.perf_counter_ns


# (label, getter, setter) in torch._C, the precision first: restoring it resets the
# per-backend switches too.  Read and written through torch._C functions captured when
# the kit is made, so a candidate that patches the Python properties cannot hide a change.
# the modules on the path from a timed call's return to its record (``RecordGuard``)
_RECORD_PATH = ("gates.checked_calls", "gates.jobs.timing", "gates.timers", "gates.harness_watch")
_SWITCHES = [
    (
        "torch.float32_matmul_precision",
        "_get_float32_matmul_precision",
        "_set_float32_matmul_precision",
    ),
    ("torch.backends.cuda.matmul.allow_tf32", "_get_cublas_allow_tf32", "_set_cublas_allow_tf32"),
    (
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
        "_get_cublas_allow_fp16_reduced_precision_reduction",
        "_set_cublas_allow_fp16_reduced_precision_reduction",
    ),
    (
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
        "_get_cublas_allow_bf16_reduced_precision_reduction",
        "_set_cublas_allow_bf16_reduced_precision_reduction",
    ),
    (
        "torch.backends.cuda.matmul.allow_fp16_accumulation",
        "_get_cublas_allow_fp16_accumulation",
        "_set_cublas_allow_fp16_accumulation",
    ),
    ("torch.backends.cudnn.allow_tf32", "_get_cudnn_allow_tf32", "_set_cudnn_allow_tf32"),
    ("torch.backends.cudnn.benchmark", "_get_cudnn_benchmark", "_set_cudnn_benchmark"),
    ("torch.backends.cudnn.enabled", "_get_cudnn_enabled", "_set_cudnn_enabled"),
]


def _backend_settings() -> list[tuple[str, Callable[[], Any], Callable[[Any], None]]]:
    """(label, read, write) of the global switches that change library calls' speed.

    A candidate that turns TF32 or cuDNN's autotuner on at import makes the frozen
    cuBLAS/cuDNN calls of the whole forward faster (or less precise), and its own
    kernel would be credited.  These are values, not objects, so they are compared
    by value.  Switches this torch does not have are skipped.
    """
    out = []
    for label, get_name, set_name in _SWITCHES:
        getter, setter = getattr(torch._C, get_name, None), getattr(torch._C, set_name, None)
        if getter is None or setter is None:
            continue

        def write(value: Any, setter: Callable[..., None] = setter) -> None:
            # some getters return a tuple (reduced precision, split-k) the setter takes apart
            setter(*value) if isinstance(value, tuple) else setter(value)

        out.append((label, getter, write))
    return out


def switch_values() -> dict[str, str]:
    """Each switch's value now, as text (``repr``): what a problem file's import sets is
    recorded this way and excused when a candidate sets the same (``excused_switches``)."""
    out = {}
    for label, read, _write in _backend_settings():
        try:
            out[label] = repr(read())
        except Exception:  # as in _differs: a switch that does not read back has no value
            out[label] = "<unreadable>"
    return out


def excused_switches(tampered: list[str], problem_switches: dict[str, str]) -> list[str]:
    """``tampered`` without the switches now holding the value the problem file's own
    import gives them: a candidate made of the problem file sets them again, and a
    baseline that never imports it (a compiled wrapper) would not show the same change."""
    if not problem_switches:
        return tampered
    now = switch_values()
    return [t for t in tampered if t not in problem_switches or now.get(t) != problem_switches[t]]


def _differs(read: Callable[[], Any], value: Any) -> bool:
    """A switch that no longer reads back (torch refuses mixed precision APIs) has changed."""
    try:
        return read() != value
    except Exception:  # any error of torch's getter means a state we did not leave
        return True


def _watched() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) of every object a timer cheat would replace."""
    items: list[tuple[str, Any, str]] = [
        ("time.perf_counter", time, "perf_counter"),
        ("time.perf_counter_ns", time, "perf_counter_ns"),
        ("time.time", time, "time"),
        ("time.monotonic", time, "monotonic"),
        ("torch.cuda.synchronize", torch.cuda, "synchronize"),
        ("torch.cuda.Event", torch.cuda, "Event"),
        ("torch.cuda.Event.record", torch.cuda.Event, "record"),
        ("torch.cuda.Event.elapsed_time", torch.cuda.Event, "elapsed_time"),
        ("torch.cuda.Event.synchronize", torch.cuda.Event, "synchronize"),
        ("torch.cuda.Event.query", torch.cuda.Event, "query"),
        ("torch.cuda.Stream.synchronize", torch.cuda.Stream, "synchronize"),
        ("torch.cuda.current_stream", torch.cuda, "current_stream"),
    ]
    # this kit's own code and the shared sampler: replacing them would fake every number
    me = sys.modules[__name__]
    items += [
        ("gates.timers.samples_ms", me, "samples_ms"),
        ("gates.timers._perf_counter_ns", me, "_perf_counter_ns"),
        ("kernelopt.measure.samples_ms", measure, "samples_ms"),
    ]
    items += [
        (f"gates.timers.TimerKit.{name}", TimerKit, name)
        for name in ("event_samples", "host_batch_ms", "sync", "now_ns", "event", "cover")
    ]
    base = getattr(torch._C, "_CudaEventBase", None)
    if base is not None:
        items += [
            ("torch._C._CudaEventBase.record", base, "record"),
            ("torch._C._CudaEventBase.elapsed_time", base, "elapsed_time"),
            ("torch._C._CudaEventBase.synchronize", base, "synchronize"),
        ]
    if hasattr(torch._C, "_cuda_synchronize"):
        items.append(("torch._C._cuda_synchronize", torch._C, "_cuda_synchronize"))
    try:
        import triton
        import triton.runtime
        import triton.testing

        items += [
            ("triton.testing.do_bench", triton.testing, "do_bench"),
            ("triton.runtime.driver", triton.runtime, "driver"),
            ("triton.runtime.driver.active", type(triton.runtime.driver), "active"),
        ]
    except ImportError:
        pass
    return items


class TimerKit:
    """Captured timers plus a tamper detector.  Create it before importing candidate code."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        # the timers, and the harness's own code (gates.harness_watch): what records calls
        self._watch = HarnessWatch(_watched())
        self.records = RecordGuard([m for m in _RECORD_PATH if m in sys.modules])
        self._settings = [
            (label, read, write, read()) for label, read, write in _backend_settings()
        ]
        self._sync: Callable[[], None] = (
            torch._C._cuda_synchronize if self.cuda else (lambda: None)  # type: ignore[attr-defined]
        )
        self._do_bench: Callable[..., Any] | None = None
        self._event_cls: Any = torch.cuda.Event if self.cuda else None
        self._sleep: Callable[[int], None] | None = torch.cuda._sleep if self.cuda else None
        if self.cuda:
            import triton.testing

            self._do_bench = triton.testing.do_bench

    def tampered(self, *instances: object) -> list[str]:
        """Labels of watched attributes that no longer hold the captured object (and of
        methods ``instances``, the harness's objects in use, hide behind their own)."""
        out = self._watch.tampered(*instances)
        out += [label for label, read, _w, value in self._settings if _differs(read, value)]
        return out

    def watch_loaded(self) -> None:
        """Also watch harness modules loaded since the kit was made (before candidate code)."""
        self._watch.watch_loaded()

    def restore(self, *instances: object) -> None:
        self._watch.restore(*instances)
        for _label, _read, write, value in self._settings:
            write(value)  # unconditionally, in order: reading a mixed state can raise

    def sync(self) -> None:
        self._sync()

    def now_ns(self) -> int:
        return _perf_counter_ns()

    def cover(self, cycles: int) -> None:
        """Queue a GPU spin of ``cycles`` clocks: the GPU is busy while a call is queued."""
        if self._sleep is not None:
            self._sleep(cycles)

    def event(self) -> Any:
        """A timing CUDA event of the class captured before the candidate was imported."""
        return self._event_cls(enable_timing=True)

    def event_samples(self, fn: Callable[[], Any], warmup_ms: float, rep_ms: float) -> list[float]:
        """``kernelopt.measure`` samples (ms) with the do_bench and clock captured here."""
        return samples_ms(
            fn,
            cuda=self._do_bench is not None,
            warmup_ms=warmup_ms,
            rep_ms=rep_ms,
            do_bench=self._do_bench,
            clock=_perf_counter_ns,
        )

    def host_batch_ms(self, fn: Callable[[], Any], calls: int) -> float:
        """Mean ms per call over ``calls`` back-to-back calls, device-wide sync at both ends."""
        self._sync()
        t0 = _perf_counter_ns()
        for _ in range(calls):
            fn()
        self._sync()
        return (_perf_counter_ns() - t0) / 1e6 / calls

    def calls_for(self, estimate_ms: float, batch_ms: float, most: int = 1000) -> int:
        return calls_for(estimate_ms, batch_ms, most)


def calls_for(estimate_ms: float, batch_ms: float, most: int = 1000) -> int:
    """Calls that make a batch of about ``batch_ms`` at ``estimate_ms`` each (3 to 1,000),
    never more than ``most`` (the outputs a batch may hold: ``checked_calls.held_calls``)."""
    most = max(1, min(1000, most))
    if not math.isfinite(estimate_ms) or estimate_ms <= 0:
        return most
    return int(min(most, max(3, math.ceil(batch_ms / estimate_ms))))
