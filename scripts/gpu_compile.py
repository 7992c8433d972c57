"""All GPU work of the compile area in one device call (see docs/TEAM_NOTES.md, "GPU host").

    source scripts/device_env.sh; python scripts/gpu_compile.py --out "$OUT"

1. Warm-up, in parallel: every core problem is compiled (max-autotune-no-cudagraphs
   and default mode) in its own process, with few compile threads each, only to fill
   Inductor's on-disk caches (FX graph cache, autotune results).  Max-autotune costs
   30-50 s of mostly CPU work per GEMM/conv problem; run side by side, the set
   compiles in roughly the time of its slowest member.  These cold compile times are
   recorded, but no timing is measured here: parallel processes would disturb it.
2. The GPU tests (tests/compile/test_gpu.py), one process, problems one after another:
   compile through our capture code (Inductor caches warm, so fast) with eager /
   compiled / default-mode timings measured on an otherwise idle GPU, then again from
   our content-hash cache (cache hit), identity re-stitch bit-exactness, triage's f.
   The captured wrappers and segmentations are written out as CPU-test fixtures.
3. A short table; fixtures as one tarball (the device returns at most 8 files).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def warm_one(rel: str) -> int:
    """Child mode: compile one problem to fill Inductor's caches; print one JSON line."""
    from kernelopt.compile.capture import warm
    from kernelopt.contracts.compiled import BASELINE_MODE
    from kernelopt.problem import load_problem

    started = time.perf_counter()
    try:
        seconds = warm(load_problem(ROOT / "problems" / rel), BASELINE_MODE)
        print(
            json.dumps(
                {
                    "problem": rel,
                    "ok": True,
                    "compile_s": seconds,
                    "wall_s": time.perf_counter() - started,
                }
            )
        )
        return 0
    except Exception as exc:  # reported, not raised: the tests will show the failure again
        print(
            json.dumps(
                {
                    "problem": rel,
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "wall_s": time.perf_counter() - started,
                }
            )
        )
        return 1


def warm_all(core: list[str], jobs: int, timeout: float) -> list[dict]:
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 8) // jobs)))

    def run(rel: str) -> dict:
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--warm", rel],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return {
                "problem": rel,
                "ok": False,
                "error": f"warm-up timed out after {timeout:.0f} s",
            }
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if lines:
            return json.loads(lines[-1])
        return {"problem": rel, "ok": False, "error": proc.stderr[-500:]}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run, core))


def table(warm: list[dict], report: dict) -> str:
    from tests.compile.helpers import problem_name

    cold = {problem_name(w["problem"]): w for w in warm}
    head = (
        f"{'problem':34} {'cold_s':>6} {'comp_s':>6} {'hit':>4} {'hit_s':>5} {'eager':>8} "
        f"{'compiled':>8} {'default':>8} {'exact':>5} {'mode':>6} {'f':>6} {'verdict':>17}"
    )
    rows = [head, "-" * len(head)]

    def num(v, d=3):
        return "-" if v is None else f"{v:.{d}f}"

    for name in sorted(set(cold) | {k for k in report if k != "launch_form"}):
        r, w = report.get(name, {}), cold.get(name, {})
        rows.append(
            f"{name[:34]:34} {num(w.get('compile_s'), 1):>6} {num(r.get('compile_seconds'), 1):>6} "
            f"{str(r.get('cache_hit', '-'))[:4]:>4} {num(r.get('cached_wall'), 2):>5} "
            f"{num(r.get('eager_ms')):>8} {num(r.get('compiled_ms')):>8} {num(r.get('default_mode_ms')):>8} "
            f"{str(r.get('identity_bit_exact', '-'))[:5]:>5} {r.get('mode', '-')!s:>6} "
            f"{num(r.get('f')):>6} {r.get('verdict', '-')!s:>17}"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu-out")))
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--warm-timeout", type=float, default=150.0)
    parser.add_argument(
        "--budget-s", type=float, default=300.0, help="stop starting tests after this"
    )
    args = parser.parse_args()
    if args.warm:
        return warm_one(args.warm)
    started = time.time()
    from tests.compile.helpers import core_problems

    core = core_problems()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    fixtures = out / "fixtures"
    print(
        f"[gpu_compile] {len(core)} core problems, warm-up with {args.jobs} processes", flush=True
    )
    warm = warm_all(core, args.jobs, args.warm_timeout)
    for w in warm:
        print(
            f"[warm] {w['problem']}: "
            + (f"{w['compile_s']:.1f} s" if w["ok"] else w["error"][:300]),
            flush=True,
        )
    print(f"[gpu_compile] warm-up done at {time.time() - started:.0f} s", flush=True)
    report_path = out / "gpu_report.json"
    env = dict(
        os.environ,
        KERNELOPT_GPU_REPORT=str(report_path),
        KERNELOPT_FIXTURE_OUT=str(fixtures),
        KERNELOPT_GPU_DEADLINE=str(started + args.budget_s),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "tests/compile/test_gpu.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rfEs",
            "--tb=short",
            "--timeout=400",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    (out / "pytest.log").write_text(proc.stdout + "\n" + proc.stderr)
    print(proc.stdout[-6000:], flush=True)
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    (out / "summary.json").write_text(json.dumps({"warm": warm, "report": report}, indent=2))
    if fixtures.is_dir():
        with tarfile.open(out / "fixtures.tar.gz", "w:gz") as tar:
            for f in sorted(fixtures.iterdir()):
                tar.add(f, arcname=f.name)
        for f in fixtures.iterdir():
            f.unlink()
        fixtures.rmdir()
    print(table(warm, report), flush=True)
    print(
        f"[gpu_compile] total {time.time() - started:.0f} s, pytest rc {proc.returncode}",
        flush=True,
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
