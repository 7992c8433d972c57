"""Run a standalone kernel harness: under ncu (one profiled launch) or timed with CUDA events.

``python -m kernelopt.profiling.harness_runner HARNESS.py --mode ncu|events``

A harness is a Python file defining ``get_args()`` and ``call(args)`` -- the
protocol of the per-kernel benchmark modules Inductor writes with
``benchmark_kernel=True``, and of ``kernelopt.profiling.harness_files.build_harness``.
It is imported under a private name (its ``__main__`` block does not run).
Warm-up calls (Triton compile, Inductor autotuning) happen before the
profiler range opens, so ncu (``--profile-from-start off``) sees exactly one
steady-state launch.  The result is one ``KERNELOPT_HARNESS {json}`` line on
stdout: the event-timing median and, for Inductor kernels, the compiled
binary's registers and spills (ptxas's numbers, more direct than counters).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from kernelopt.measure import Stopwatch, elapsed

RESULT_PREFIX = "KERNELOPT_HARNESS "
WARMUP_CALLS = 3


def runner_command(harness: Path, mode: str, *extra: str) -> list[str]:
    """The argv that runs ``harness`` in a fresh interpreter, as the profiler and the event
    timing both start it."""
    return [
        sys.executable,
        "-P",  # its working directory is not an import path (gates/zygote.py says why)
        "-m",
        "kernelopt.profiling.harness_runner",
        str(harness),
        "--mode",
        mode,
        *extra,
    ]


def load_harness(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("kernelopt_harness", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernelopt_harness"] = module
    spec.loader.exec_module(module)
    for name in ("get_args", "call"):
        if not callable(getattr(module, name, None)):
            raise AttributeError(f"{path.name} defines no {name}(): not a kernel harness")
    return module


def compiled_stats(module: Any) -> dict[str, int]:
    """Registers / spills of the Inductor kernels the harness holds (CachingAutotuner launchers)."""
    stats: dict[str, int] = {}
    listed = getattr(module, "kernels", None)
    objects = listed() if callable(listed) else list(vars(module).values())
    for value in objects:
        launchers = getattr(value, "launchers", None)
        if not launchers:
            continue
        launcher = launchers[0]
        for attr, key in (("n_regs", "registers"), ("n_spills", "spills")):
            number = getattr(launcher, attr, None)
            if isinstance(number, int):
                stats[key] = max(stats.get(key, 0), number)
    return stats


def run(path: Path, mode: str, reps: int) -> dict[str, Any]:
    import torch

    from kernelopt.precision import strict_fp32

    strict_fp32()  # before the harness is imported: Inductor reads the flags at import
    module = load_harness(path)
    args = module.get_args()
    cuda = torch.cuda.is_available()
    if mode == "ncu" and not cuda:
        raise RuntimeError("ncu mode needs a CUDA device")
    for _ in range(WARMUP_CALLS):
        module.call(args)
    if not cuda:  # a CPU harness (tests, the Triton interpreter): wall-clock timing
        return {
            "mode": mode,
            "timer": "wall",
            **_wall_times(module, args, reps),
            **compiled_stats(module),
        }
    torch.cuda.synchronize()
    result: dict[str, Any] = {"mode": mode, "timer": "cuda-events"}
    if mode == "ncu":
        torch.cuda.cudart().cudaProfilerStart()
        module.call(args)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    else:
        samples = _stopwatch_ms(module, args, reps, cuda=True)
        result["median_ms"] = statistics.median(samples)
        result["min_ms"] = min(samples)
        result["reps"] = reps
    result.update(compiled_stats(module))
    return result


def _stopwatch_ms(module: Any, args: Any, reps: int, cuda: bool) -> list[float]:
    """One stopwatch per call (``kernelopt.measure``): events on the GPU, the host clock else."""
    watches = [Stopwatch(cuda) for _ in range(reps)]
    for watch in watches:
        watch.start()
        module.call(args)
        watch.stop()
    return elapsed(watches)


def _wall_times(module: Any, args: Any, reps: int) -> dict[str, Any]:
    samples = _stopwatch_ms(module, args, reps, cuda=False)
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "reps": reps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", type=Path)
    parser.add_argument("--mode", choices=("ncu", "events"), default="events")
    parser.add_argument("--reps", type=int, default=50)
    ns = parser.parse_args(argv)
    result = run(ns.harness, ns.mode, ns.reps)
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
