"""What the gate sandbox costs per child launch: spawned and forked, sandbox on and off.

``python -m scripts.sandbox_cost [--device cpu|cuda] [--reps 5] [--spawned-reps N] [--out FILE]``

Runs one honest candidate (tests/fixtures/candidates/gates/swish_fused.py on the
swish_bias problem) through ``gates.runner.run_job`` ``reps`` times per
launch path, with ``KERNELOPT_SANDBOX`` on and off, and prints the median
wall time of each and the difference.  Also times the bare bwrap start
(``true`` inside the sandbox) and a zygote's start-up both ways.  Progress goes
to stderr as it runs; the last stdout line is the added cost per verdict: a
verdict's gate children are forked from the worker's zygote (one correctness
child, one timing child: ``--launches-per-verdict``), the zygote's own start
is paid once per worker, not per verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _job(tmp: Path, device: str):
    import torch

    from gates.protocol import CandidateJob, InputSet, ModelSource

    tests = REPO / "tests"
    inputs = tmp / "inputs"
    inputs.mkdir(exist_ok=True)
    (tmp / "outputs").mkdir(exist_ok=True)
    torch.save([torch.randn(8, 64)], inputs / "seed0.pt")
    return CandidateJob(
        model=ModelSource(
            kind="candidate",
            problem_path=str(tests / "problems" / "gates" / "swish_bias.py"),
            candidate_path=str(tests / "fixtures" / "candidates" / "gates" / "swish_fused.py"),
        ),
        device=device,
        input_sets=[InputSet(name="seed0", seed=0)],
        inputs_dir=str(inputs),
        out_dir=str(tmp / "outputs"),
    )


def _median_run(device: str, reps: int, via: object | None) -> float:
    from gates.runner import run_job

    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        job = _job(Path(tmp), device)
        for i in range(reps):
            started = time.perf_counter()
            out = run_job(job, Path(tmp) / f"w{i}", timeout_s=300, device=device, via=via)
            walls.append(time.perf_counter() - started)
            if not out.ok:
                raise SystemExit(f"job failed: {out.describe()}\n{out.error_text()}")
    return statistics.median(walls)


def _say(message: str) -> None:
    sys.stderr.write(f"[sandbox_cost] {message}\n")
    sys.stderr.flush()


def measure(device: str, reps: int, spawned_reps: int | None = None) -> dict[str, float]:
    from gates import sandbox
    from gates.runner import zygote_env
    from gates.zygote import Zygote

    os.environ.setdefault("KERNELOPT_GATES_SMALL", "1")
    result: dict[str, float] = {}
    binary = sandbox.require()
    bare = []
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run([*sandbox.bwrap_args(binary), "true"], check=True)
        bare.append(time.perf_counter() - started)
    result["bwrap_true_s"] = statistics.median(bare)
    _say(f"bwrap true: {result['bwrap_true_s']:.3f} s")
    for mode in ("off", "on"):
        os.environ["KERNELOPT_SANDBOX"] = mode
        result[f"spawned_{mode}_s"] = _median_run(device, spawned_reps or reps, None)
        _say(f"sandbox {mode}: spawned {result[f'spawned_{mode}_s']:.3f} s")
        started = time.perf_counter()
        zygote = Zygote(zygote_env(device), start_timeout_s=300)
        result[f"zygote_start_{mode}_s"] = time.perf_counter() - started
        try:
            _median_run(device, 1, zygote)  # first fork warms lazy imports
            result[f"forked_{mode}_s"] = _median_run(device, reps, zygote)
        finally:
            zygote.close()
        _say(
            f"sandbox {mode}: zygote start {result[f'zygote_start_{mode}_s']:.3f} s, "
            f"forked {result[f'forked_{mode}_s']:.3f} s"
        )
    for kind in ("spawned", "forked", "zygote_start"):
        result[f"{kind}_added_s"] = result[f"{kind}_on_s"] - result[f"{kind}_off_s"]
    return {k: round(v, 4) for k, v in result.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default="")
    parser.add_argument("--spawned-reps", type=int, default=0, help="default: --reps")
    parser.add_argument("--launches-per-verdict", type=int, default=2)
    parser.add_argument("--target-s", type=float, default=0.5)
    args = parser.parse_args()
    result: dict[str, object] = {
        "device": args.device,
        "reps": args.reps,
        **measure(args.device, args.reps, args.spawned_reps or None),
    }
    per_verdict = round(args.launches_per_verdict * float(result["forked_added_s"]), 4)
    result["verdict_added_s"] = per_verdict
    text = json.dumps(result, indent=2)
    sys.stdout.write(text + "\n")
    verdict = "within" if per_verdict <= args.target_s else "OVER"
    sys.stdout.write(
        f"added cost per verdict: {per_verdict:+.3f} s ({args.launches_per_verdict} forked "
        f"launches x {float(result['forked_added_s']):+.3f} s; spawned launch "
        f"{float(result['spawned_added_s']):+.3f} s) -- {verdict} the {args.target_s} s target\n"
    )
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
