"""The gates' GPU work in one device call: GPU tests, the adversarial table, cost per verdict.

Usage on the GPU host (see docs/TEAM_NOTES.md):

    source scripts/device_env.sh; GATES_BUDGET_S=420 python3 -m scripts.gpu_gates

Optional: GATES_CASES=diag_rowscale,side_stream (a subset), GATES_CAMPAIGN=1 (also the
campaign-path test), GATES_BASELINE_MODE (default: default; max-autotune costs 30-50 s per
GEMM compile), GATES_MAX_ROUNDS (default 6). Progress streams live; rows are appended to
$OUT/gates_gpu_rows.jsonl as they are decided, so a run cut short still reports.

Measures the device-to-device copy bandwidth (the roofline's ceiling), runs
``pytest -m gpu`` on tests/gates (the adversarial suite, then the campaign
path if time remains), and prints the table: candidate, cheat class,
expected, verdict, deciding gate, numbers; plus the median device-seconds of
one full (four-gate) verdict.  Everything lands in $OUT.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_bandwidth_gbs() -> float:
    import torch
    import triton.testing

    x = torch.empty(2**28, dtype=torch.float32, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=100, return_mode="median")
    return 2 * 2**30 / (ms * 1e-3) / 1e9


def main() -> int:
    started = time.time()
    out = Path(os.environ.get("OUT") or "/tmp/gates-out")
    out.mkdir(parents=True, exist_ok=True)
    budget = float(os.environ.get("GATES_BUDGET_S", "420"))
    import torch
    import triton

    device = torch.cuda.get_device_name()
    bw = copy_bandwidth_gbs()
    print(f"device {device}  torch {torch.__version__}  triton {triton.__version__}", flush=True)
    print(f"copy bandwidth {bw:.0f} GB/s (read + write)", flush=True)
    mode = os.environ.get("GATES_BASELINE_MODE", "default")
    env = dict(
        os.environ,
        KERNELOPT_GATES_OUT=str(out),
        KERNELOPT_GATES_COPY_BW=f"{bw:.0f}",
        KERNELOPT_GATES_BASELINE_MODE=mode,
        KERNELOPT_GATES_MAX_ROUNDS=os.environ.get("GATES_MAX_ROUNDS", "6"),
        KERNELOPT_GATES_SUITE_DEADLINE=str(started + 0.75 * budget),
        KERNELOPT_GATES_DEADLINE=str(started + budget),
        KERNELOPT_GATES_CASES=os.environ.get("GATES_CASES", ""),
    )
    if importlib.util.find_spec("pytest") is not None:
        files = ["tests/gates/test_gpu_adversarial.py"]
        if os.environ.get("GATES_CAMPAIGN") == "1":
            files.append("tests/gates/test_gpu_campaign.py")
        cmd = [
            sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-s", "-rfEs",
            "-p", "no:cacheprovider", *files,
        ]  # fmt: skip
        rc = _stream(cmd, env, out / "pytest.log")
    else:
        print("pytest is not installed here: running the adversarial suite directly", flush=True)
        rc = _direct(env)
    report = out / "gates_gpu.json"
    if report.is_file():
        data = json.loads(report.read_text())
        print("\n" + (out / "gates_gpu_table.txt").read_text())
        print(f"\nphases (s): {data['phases_s']}")
        print(f"reference children (s): {data['reference_seconds']}")
        print(
            f"median device-seconds per full four-gate verdict: {data['median_full_verdict_gpu_seconds']}"
        )
        print(
            f"median device-seconds per verdict (any depth): {data['median_verdict_gpu_seconds']}"
        )
        for row in data["rows"]:
            print(f"  {row['candidate']:18s} {row['reason'][:150]}")
    campaign = out / "gates_campaign.txt"
    if campaign.is_file():
        print("\ncampaign path:\n" + campaign.read_text())
    print(f"baseline mode {mode}; total {time.time() - started:.0f} s; exit {rc}")
    return rc


def _stream(cmd: list[str], env: dict[str, str], log_path: Path) -> int:
    """Run ``cmd``, echoing its output live (a killed run still shows its progress)."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert_out = proc.stdout
        if assert_out is not None:
            for line in assert_out:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()
        return proc.wait()


def _direct(env: dict[str, str]) -> int:
    """The suite without pytest: same settings, same expectations, same files."""
    os.environ.update(env)
    os.environ["KERNELOPT_GATES_SMALL"] = "0"
    from gates.runner import fast_launch
    from tests.gates.test_gpu_adversarial import gpu_settings
    from tests.support.adversarial import (
        cases_for,
        format_table,
        run_suite,
        scratch_dir,
        select_cases,
    )

    out = Path(env["KERNELOPT_GATES_OUT"])
    tmp = scratch_dir("kernelopt-gates-gpu-")
    with fast_launch("cuda") as zygote:
        print(f"[gates] {zygote.note} ({zygote.seconds:.1f} s)", flush=True)
        suite = run_suite(
            gpu_settings(),
            tmp,
            select_cases(cases_for("cuda"), env.get("KERNELOPT_GATES_CASES")),
            parallel=6,
            deadline=float(env["KERNELOPT_GATES_SUITE_DEADLINE"]),
        )
    suite.phases["zygote"] = float(bool(zygote))
    suite.phases["launch_setup_s"] = round(zygote.seconds, 2)
    (out / "gates_gpu.json").write_text(json.dumps(suite.to_json(), indent=1, default=str))
    (out / "gates_gpu_table.txt").write_text(format_table(suite))
    bad = [o.case.candidate for o in suite.outcomes if not o.as_expected]
    print(f"not as expected: {bad}" if bad else "every case as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
