"""Where does the host clock's noise come from?  Trusted code only, on the GPU host.

Gate 4 times a dispatch-bound forward by the host clock, and on the H200 the same
eager forward read 0.09-0.28 ms per call in different rounds (identity corpus,
docs/results/h200/nineteenth/call1): quarantines for identical code.  This script
times one eager corpus forward in host batches, as a timing child does, under
conditions the gate could control, and streams one JSON line per batch:

* ``drift``: back-to-back batches in one process (how fast the noise moves);
* ``alternate``: two instances of the model, batches alternated A B A B (the
  spread of adjacent pairs against pairs a second apart);
* ``gc``: Python's collector off against on;
* ``pinned``: the process pinned to one CPU, then to that CPU with its SMT sibling,
  with the sibling's busy share from /proc/stat during each batch;
* ``fresh``: fresh processes of three batches each, as a round sees them;
* ``turns``: two live processes, one model each, pinned to one CPU and taking turns
  under this process's control (SIGSTOP/SIGCONT, a pipe each, each turn timed here):
  does the alternation that cancels the noise inside one process also cancel it
  across two, where a candidate and the trusted baseline could each have their own?
  The SM clock is read at each turn's start;
* the GPU's utilisation and clock while this process is idle, before and after: a GPU
  shared with other work shows there (one round's CUDA events read 0.026 ms, another's
  0.28 ms, for the same eager forward).

    source scripts/device_env.sh
    python3 -m scripts.gpu_host_noise --out "$OUT"  # ~60-90 s
    python3 -m scripts.gpu_host_noise --out "$OUT" --only turns  # ~30 s
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gates.perfstats import spread
from gates.placement import current_cpu
from scripts.gpu_identity_corpus import CORPUS

BATCH_CALLS = 300
TURN_MS = 30.0  # one turn's length: the alternation that cancelled the noise in one process


def _cpu_times() -> dict[int, tuple[int, int]]:
    """Busy and total jiffies per CPU, from /proc/stat."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            values = [int(v) for v in fields]
            idle = values[3] + values[4]
            out[int(name[3:])] = (sum(values) - idle, sum(values))
    return out


def _steal_jiffies() -> int:
    """Host-wide steal time (a hypervisor running other guests on our CPUs), /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) if len(fields) > 8 else 0


def _siblings(cpu: int) -> list[int]:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    if not path.exists():
        return [cpu]
    cpus: list[int] = []
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


class Forward:
    """One eager corpus forward on CUDA with rotating inputs, timed in host batches."""

    def __init__(self, problem: str, device: str) -> None:
        import importlib.util

        import torch

        path = next(p for p in CORPUS if p.stem == problem)
        spec = importlib.util.spec_from_file_location(problem, path)
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        self.model = module.Model(*module.get_init_inputs()).to(device)
        self.sets = [[t.to(device) for t in module.get_inputs()] for _ in range(4)]
        self.torch, self.cuda = torch, device.startswith("cuda")
        self.gc_ms = 0.0
        gc.callbacks.append(self._gc)
        self._gc_start = 0.0
        for _ in range(50):
            self.batch(20)

    def _gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_ms += (time.perf_counter() - self._gc_start) * 1e3

    def batch(self, calls: int = BATCH_CALLS) -> dict[str, Any]:
        torch = self.torch
        before, gc_before, steal = _cpu_times(), self.gc_ms, _steal_jiffies()
        cpu = current_cpu()
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(calls):
                self.model(*self.sets[i % len(self.sets)])
        if self.cuda:
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3 / calls
        after = _cpu_times()
        busy = {}
        for c in _siblings(cpu):
            d_busy = after[c][0] - before[c][0]
            d_all = after[c][1] - before[c][1]
            busy[c] = round(d_busy / d_all, 2) if d_all else None
        return {
            "ms": round(ms, 5),
            "cpu": cpu,
            "cpu_after": current_cpu(),
            "sibling_busy": busy,
            "gc_ms": round(self.gc_ms - gc_before, 2),
            "steal_jiffies": _steal_jiffies() - steal,
            "t": round(time.monotonic(), 3),
        }


def gpu_idle(seconds: float = 2.0) -> dict[str, Any]:
    """What the GPU does while this process does nothing: others' work shows here.

    Utilisation and SM clock sampled by NVML every 0.1 s, and the compute
    processes NVML lists (another container's may be hidden, its load is not).
    """
    try:
        import pynvml
    except ImportError:
        return {"nvml": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        util, clocks = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            util.append(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            time.sleep(0.1)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return {
            "util_pct": util,
            "sm_clock_mhz": clocks,
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "compute_processes": [(p.pid, p.usedGpuMemory) for p in procs],
        }
    except pynvml.NVMLError as exc:
        return {"nvml": str(exc)}


class SmClock:
    """The GPU's SM clock now, read through NVML in this process; None without NVML."""

    def __init__(self) -> None:
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nvml = pynvml
        except Exception:  # a diagnostic: no NVML, no clock column
            self._nvml = None

    def __call__(self) -> int | None:
        if self._nvml is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None


def turn_child(problem: str, device: str, cpu: int) -> None:
    """One side of ``turns``: pinned before torch loads, then one batch per ``go N`` line."""
    os.sched_setaffinity(0, {cpu})
    fwd = Forward(problem, device)
    print(f"ready {fwd.batch(50)['ms']}", flush=True)
    for line in sys.stdin:
        word, _, calls = line.strip().partition(" ")
        if word != "go":
            return
        print(json.dumps(fwd.batch(int(calls))), flush=True)


class TurnTaker:
    """A live child that runs only during its turns: stopped between them, timed here."""

    def __init__(self, problem: str, device: str, cpu: int) -> None:
        command = [sys.executable, "-m", "scripts.gpu_host_noise", "--turn-child", problem]
        self.proc = subprocess.Popen(
            [*command, "--device", device, "--cpu", str(cpu)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout
        self.estimate_ms = 0.0

    def ready(self) -> None:
        """Wait for its model to be built and warm, then stop it until its first turn."""
        word, _, value = self._out.readline().partition(" ")
        if word != "ready":
            raise RuntimeError(f"a turn child did not start (rc {self.proc.poll()})")
        self.estimate_ms = float(value)
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def turn(self, calls: int) -> tuple[float, dict[str, Any]]:
        """Per-call ms of one turn as this process's clock saw it, and the child's own row."""
        os.killpg(self.proc.pid, signal.SIGCONT)
        t0 = time.perf_counter_ns()
        self._in.write(f"go {calls}\n")
        self._in.flush()
        line = self._out.readline()
        ms = (time.perf_counter_ns() - t0) / 1e6 / calls
        os.killpg(self.proc.pid, signal.SIGSTOP)
        return ms, json.loads(line)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)
            self._in.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def _quartiles(values: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"median {q2:.3f} IQR {q1:.3f}-{q3:.3f} (min {min(values):.3f}, max {max(values):.3f})"


def turns(problem: str, device: str, out: Path, sessions: int = 3, pairs: int = 20) -> list[str]:
    """Fresh pairs of live children, one model each, taking ABBA turns on one CPU."""
    clock, mine = SmClock(), current_cpu()
    allowed = sorted(os.sched_getaffinity(0))
    cpu = next((c for c in allowed if c != mine), allowed[0])
    lines, every = [], []
    for session in range(sessions):
        a, b = TurnTaker(problem, device, cpu), TurnTaker(problem, device, cpu)
        try:
            a.ready()
            b.ready()
            calls = max(1, round(TURN_MS / max(a.estimate_ms, b.estimate_ms)))
            times: dict[str, list[float]] = {"a": [], "b": []}
            for pair in range(pairs):
                for name, side in (("a", a), ("b", b)) if pair % 2 == 0 else (("b", b), ("a", a)):
                    mhz = clock()
                    ms, row = side.turn(calls)
                    times[name].append(ms)
                    _emit(
                        out,
                        {"problem": problem, "exp": "turns", "session": session, "pair": pair}
                        | {"side": name, "ms": round(ms, 5), "sm_mhz": mhz, "calls": calls}
                        | {"child": row},
                    )
        finally:
            a.close()
            b.close()
        ratios = [x / y for x, y in zip(times["a"], times["b"], strict=True)]
        every += ratios
        lines.append(
            f"  turns session {session} (cpu {cpu}, {calls} calls a turn): a/b {_quartiles(ratios)};"
            f" a {statistics.median(times['a']):.4f} ms, b {statistics.median(times['b']):.4f} ms"
        )
    lines.insert(0, f"{problem}: turns, all pairs a/b {_quartiles(every)}")
    return lines


def _emit(out: Path, row: dict[str, Any]) -> None:
    with (out / "host_noise.jsonl").open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def _spread(values: list[float]) -> float:
    return round(spread(values), 3)


def child(problem: str, device: str) -> None:
    fwd = Forward(problem, device)
    print(json.dumps([fwd.batch() for _ in range(3)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--problem", action="append", default=[])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--only", choices=("all", "turns"), default="all", help="turns: only the turns experiment"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--turn-child", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.device)
        return
    if args.turn_child:
        turn_child(args.turn_child, args.device, args.cpu)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    ps = subprocess.run(
        ["ps", "-eo", "pid,pcpu,psr,comm", "--sort=-pcpu"], capture_output=True, text=True
    ).stdout.splitlines()[:12]
    _emit(
        args.out,
        {
            "info": {
                "cpus": os.cpu_count(),
                "affinity": sorted(os.sched_getaffinity(0)),
                "siblings": {c: _siblings(c) for c in sorted(os.sched_getaffinity(0))},
                "loadavg": os.getloadavg(),
                "top": ps,
            },
            "gpu_idle_before": gpu_idle(),
        },
    )
    summary: list[str] = []
    for problem in args.problem or ["alpha_dropout", "argmax_output"]:
        summary += turns(problem, args.device, args.out)
        if args.only == "turns":
            continue
        a, b = Forward(problem, args.device), Forward(problem, args.device)
        drift = [a.batch() for _ in range(30)]
        for row in drift:
            _emit(args.out, {"problem": problem, "exp": "drift", **row})
        pairs = [(a.batch(), b.batch()) for _ in range(20)]
        ratios = [x["ms"] / y["ms"] for x, y in pairs]
        far = [pairs[i][0]["ms"] / pairs[(i + 5) % 20][1]["ms"] for i in range(20)]
        for x, y in pairs:
            _emit(args.out, {"problem": problem, "exp": "alternate", "a": x, "b": y})
        gc.disable()
        off = [a.batch() for _ in range(10)]
        gc.enable()
        on = [a.batch() for _ in range(10)]
        for label, rows in (("gc_off", off), ("gc_on", on)):
            for row in rows:
                _emit(args.out, {"problem": problem, "exp": label, **row})
        pinned: dict[str, list[float]] = {}
        everyone = os.sched_getaffinity(0)
        for cpu in sorted(everyone)[:: max(1, len(everyone) // 4)][:4]:
            for label, cpus in ((f"cpu{cpu}", {cpu}), (f"core{cpu}", set(_siblings(cpu)))):
                os.sched_setaffinity(0, cpus & everyone)
                rows = [a.batch() for _ in range(6)]
                pinned[label] = [r["ms"] for r in rows]
                for row in rows:
                    _emit(args.out, {"problem": problem, "exp": "pinned", "pin": label, **row})
        os.sched_setaffinity(0, everyone)
        fresh = []
        for _ in range(8):
            command = [sys.executable, "-m", "scripts.gpu_host_noise", "--child", problem]
            proc = subprocess.run(
                [*command, "--device", args.device],
                capture_output=True,
                text=True,
                timeout=120,
            )
            rows = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else []
            fresh.append(sorted(r["ms"] for r in rows)[1] if rows else float("nan"))
            _emit(args.out, {"problem": problem, "exp": "fresh", "batches": rows})
        summary += [
            f"{problem}: drift spread {_spread([r['ms'] for r in drift])} "
            f"(gc ms in batches {sum(r['gc_ms'] for r in drift):.1f})",
            f"  alternate A/B adjacent ratio spread {_spread(ratios)}, 5 pairs apart {_spread(far)}",
            f"  gc off spread {_spread([r['ms'] for r in off])}, on {_spread([r['ms'] for r in on])}",
            "  pinned: " + ", ".join(f"{k} {min(v):.4f}-{max(v):.4f}" for k, v in pinned.items()),
            f"  fresh processes (median of 3 batches): {[round(x, 4) for x in fresh]} "
            f"spread {_spread(fresh)}",
        ]
    idle = gpu_idle()
    _emit(args.out, {"gpu_idle_after": idle})
    summary.append(
        f"GPU while idle (after): util {idle.get('util_pct')} clocks {idle.get('sm_clock_mhz')}"
    )
    text = "\n".join(summary) + "\n"
    (args.out / "host_noise.txt").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
