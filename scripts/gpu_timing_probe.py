"""Why do ~20 us forwards time 55-115 % apart in fresh processes?  One device call to find out.

    source scripts/device_env.sh; python3 scripts/gpu_timing_probe.py [--processes 6]

Gate 4 times each side in fresh processes and quarantines a candidate when the
per-process medians disagree by more than 10 %.  On the H200 two honest
launch-bound candidates (swish_fused, tiny_scale_honest: ~21 us forwards over
32 MB) never settled.  This probe times the same forwards outside the gates,
in fresh spawned processes, and prints for each process:

* the SM and memory clocks before and after (``nvidia-smi``);
* ``do_bench`` with L2 flushing (what gate 4 uses): median, min, IQR;
* ``do_bench`` ten times back to back in the same process (drift within a process);
* the same forward replayed from a CUDA graph (no launch overhead at all);
* a host timer over 200 back-to-back calls between two device syncs;
* per-call events with no L2 flush, with do_bench's zeroing flush (which leaves
  the L2 full of dirty lines the timed kernel must write back) and with a
  read-only flush.

Then the same two forwards through gate 4's own TimingJobs (forked from a
zygote, like the gates do), ``--processes`` times each.

If the graph replay is steady while ``do_bench`` is not, launch overhead
leaks into the events; if the clocks differ between slow and fast processes,
it is clock ramping; if one process is steady in itself but far from the
others, it is per-process state (allocation, autotuning).  Output: a table
and $OUT/timing_probe.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORWARDS = ("eager", "compiled", "candidate")


def clocks() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi: {exc}"


def _event_median(model, x, flush, reps: int = 400) -> float:
    """Median of per-call CUDA-event times with ``flush`` before each call."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush()
        starts[i].record()
        model(x)
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def child(forward: str) -> dict:
    """One fresh process: build one forward, time it every way, report numbers."""
    sys.path.insert(0, str(ROOT))
    import torch
    import triton.testing

    os.environ.setdefault("KERNELOPT_GATES_SMALL", "0")
    from gates.problem_io import ProblemFile, load_candidate_class

    problem = ProblemFile(str(ROOT / "tests/gates/problems/swish_bias.py"))
    before = clocks()
    torch.manual_seed(0)
    if forward == "candidate":
        cls = load_candidate_class(str(ROOT / "tests/gates/candidates/swish_fused.py"))
        model = problem.build(cls, 0, "cuda")
    else:
        model = problem.build(problem.Model, 0, "cuda")
        if forward == "compiled":
            model = torch.compile(model)
    x = torch.randn(4096, 2048, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        bench = [
            triton.testing.do_bench(lambda: model(x), warmup=25, rep=100, return_mode="all")
            for _ in range(10)
        ]
        flush = torch.empty(int(256e6 // 4), dtype=torch.int32, device="cuda")
        flushes = {
            "none": lambda: None,
            "zero": flush.zero_,  # what do_bench does: leaves L2 full of dirty lines
            "read": lambda: flush.sum(),  # leaves L2 full of clean lines
        }
        by_flush = {name: _event_median(model, x, f) for name, f in flushes.items()}
        try:
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                model(x)  # warm on the capture stream
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                model(x)
            replay = triton.testing.do_bench(graph.replay, warmup=25, rep=100, return_mode="median")
        except RuntimeError as exc:  # a forward that cannot be captured: the rest still counts
            print(f"graph capture failed: {exc}", file=sys.stderr)
            replay = float("nan")
        import time

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            model(x)
        torch.cuda.synchronize()
        host_ms = (time.perf_counter() - t0) * 1e3 / 200
    first = bench[0]
    q = statistics.quantiles(first, n=4)
    return {
        "forward": forward,
        "clocks_before": before,
        "clocks_after": clocks(),
        "bench_median_ms": statistics.median(first),
        "bench_min_ms": min(first),
        "bench_iqr_rel": (q[2] - q[0]) / statistics.median(first),
        "bench_samples": len(first),
        "bench_medians_in_process": [round(statistics.median(b), 5) for b in bench],
        "graph_replay_ms": replay,
        "flush_medians_ms": by_flush,
        "host_ms": host_ms,
    }


def product_path(processes: int, out: Path, device: str = "cuda") -> list[dict]:
    """The same two forwards through gate 4's own machinery: TimingJobs from the zygote.

    If the spread shows here but not in the plain processes above, its cause is in
    our harness (fork from the zygote, busy warm-up, input loading), not in the GPU.
    """
    sys.path.insert(0, str(ROOT))
    os.environ["KERNELOPT_GATES_SMALL"] = "0"
    from gates.protocol import ModelSource, TimingJob, TimingResult
    from gates.reference import prepare_reference
    from gates.runner import fast_launch, run_job
    from kernelopt.contracts.verdicts import GateSettings

    problem = str(ROOT / "tests/gates/problems/swish_bias.py")
    sides = {
        "baseline": ModelSource(kind="compiled", problem_path=problem, compile_mode="default"),
        "candidate": ModelSource(
            kind="candidate",
            problem_path=problem,
            candidate_path=str(ROOT / "tests/gates/candidates/swish_fused.py"),
        ),
    }
    rows = []
    with fast_launch(device) as zygote:
        print(f"product path: {zygote.note}", flush=True)
        bundle = prepare_reference(problem, GateSettings(device=device), out / "reference")
        for i in range(processes):
            for side in ("baseline", "candidate") if i % 2 == 0 else ("candidate", "baseline"):
                job = TimingJob(
                    side=side,
                    model=sides[side],
                    device=device,
                    inputs_dir=str(bundle.inputs_dir),
                    input_set=bundle.input_sets[0].name,
                )
                outcome = run_job(job, out / f"job{i}-{side}", timeout_s=240, device=device)
                if not outcome.ok or outcome.result is None:
                    print(f"{side} job {i} failed: {outcome.describe()}", flush=True)
                    continue
                result = TimingResult.model_validate(outcome.result)
                ms = result.event_ms
                if ms is None:  # cpu: no CUDA events, the per-call host samples
                    ms = statistics.median(result.event_samples)
                row = {
                    "process": i,
                    "side": side,
                    "event_ms": ms,
                    "host_ms": result.host_ms,
                    "warm_s": result.warm_seconds,
                }
                rows.append(row)
                print(
                    f"product {i} {side:9} event {ms * 1e3:7.1f} us  "
                    f"host {result.host_ms * 1e3:7.1f} us  warm {result.warm_seconds:.1f} s",
                    flush=True,
                )
    for side in sides:
        values = [r["event_ms"] for r in rows if r["side"] == side]
        if len(values) > 1:
            mid = statistics.median(values)
            print(
                f"product {side:9} median {mid * 1e3:7.1f} us, spread across processes "
                f"{(max(values) - min(values)) / mid:.1%}",
                flush=True,
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--child", choices=FORWARDS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--product-only-on",
        choices=["cuda", "cpu"],
        help="only the gate-4 TimingJob part (cpu: a smoke run of the script itself)",
    )
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child)), flush=True)
        return 0
    out = Path(os.environ.get("OUT", "/tmp/timing-probe-out"))
    out.mkdir(parents=True, exist_ok=True)
    if args.product_only_on:
        product = product_path(args.processes, out, args.product_only_on)
        (out / "timing_probe.json").write_text(json.dumps({"product": product}, indent=2))
        return 0
    rows = []
    for i in range(args.processes):
        for forward in FORWARDS if i % 2 == 0 else tuple(reversed(FORWARDS)):
            run = subprocess.run(
                [sys.executable, __file__, "--child", forward],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=ROOT,
            )
            line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(f"{forward} process {i} failed:\n{run.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(line[len("RESULT ") :]) | {"process": i}
            rows.append(row)
            print(
                f"{i} {forward:9} bench {row['bench_median_ms'] * 1e3:7.1f} us "
                f"(min {row['bench_min_ms'] * 1e3:6.1f}, iqr {row['bench_iqr_rel']:.1%}) "
                f"in-process {[round(m * 1e3, 1) for m in row['bench_medians_in_process']]} "
                f"graph {row['graph_replay_ms'] * 1e3:6.1f} us  host {row['host_ms'] * 1e3:6.1f} us  "
                f"flush none/zero/read "
                f"{'/'.join(f'{v * 1e3:.1f}' for v in row['flush_medians_ms'].values())} us  "
                f"clocks {row['clocks_before']} -> {row['clocks_after']}",
                flush=True,
            )
    product = product_path(args.processes, out)
    (out / "timing_probe.json").write_text(
        json.dumps({"plain": rows, "product": product}, indent=2)
    )
    for forward in FORWARDS:
        mine = [r for r in rows if r["forward"] == forward]
        if len(mine) < 2:
            continue
        for key in ("bench_median_ms", "graph_replay_ms", "host_ms"):
            values = [r[key] for r in mine]
            mid = statistics.median(values)
            print(
                f"{forward:9} {key:16} median {mid * 1e3:7.1f} us, spread across processes "
                f"{(max(values) - min(values)) / mid:.1%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
