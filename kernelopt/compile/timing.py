"""GPU timing helpers for compile and triage: do_bench and in-context profiling.

Every wall-time number here comes from ``triton.testing.do_bench`` with the
budgets of docs/method.md#gates (25 ms warm-up, 100 ms repetitions, median), the same timer
the perf gate uses, so compile-time numbers and gate numbers are comparable.
Per-kernel GPU times come from the PyTorch profiler (CUPTI kernel records),
summed per kernel name over several forwards and divided by their count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kernelopt.errors import NoGpuError
from kernelopt.measure import REP_MS, WARMUP_MS, median_ms


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise NoGpuError("this step needs a CUDA GPU and none is visible")


def init_cuda() -> None:
    """Create the CUDA context now, so a step's stage clock tells it apart from loading.

    A cold context costs seconds; without this the time went to whichever stage
    touched CUDA first and looked like slow loading.
    """
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def bench_ms(fn: Callable[[], Any], warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS) -> float:
    """Median wall time of ``fn`` in ms on the GPU (``kernelopt.measure``, L2 flushed)."""
    return median_ms(fn, cuda=True, warmup_ms=warmup_ms, rep_ms=rep_ms)


def profile_kernels(
    fn: Callable[[], Any], iters: int = 10, warmup: int = 3
) -> dict[str, tuple[float, int]]:
    """GPU kernel time per forward, by kernel name: name -> (ms per forward, launches per forward).

    Memcpy/memset records count too (they are GPU time the model spends).
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    total_us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for evt in prof.events():
        if getattr(evt, "device_type", None) != DeviceType.CUDA:
            continue
        total_us[evt.name] += evt.time_range.elapsed_us()
        count[evt.name] += 1
    return {
        name: (total_us[name] / iters / 1000.0, max(1, round(count[name] / iters)))
        for name in total_us
    }
