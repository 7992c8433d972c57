"""Cheat -- an honest kernel, but the module rewires the timers when imported."""

import time

import torch
import triton
import triton.testing

_real_perf_counter = time.perf_counter
time.perf_counter = lambda: _real_perf_counter() / 1000.0  # a clock 1000x slower
triton.testing.do_bench = lambda fn, *a, **k: (
    [0.001] * 10 if k.get("return_mode") == "all" else 0.001
)
if torch.cuda.is_available():
    torch.cuda.Event.elapsed_time = lambda self, end_event: 0.001

# the honest kernel itself: only the cheat above differs
from tests.gates.candidates.swish_fused import ModelNew  # noqa: E402, F401
