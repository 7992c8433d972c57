"""All GPU work of the compile area in one device call (see docs/TEAM_NOTES.md, "GPU host").

    source scripts/device_env.sh; python3 scripts/gpu_compile.py --out "$OUT" [--fixtures-first]

Default (full capture, ~260 s on the H200 for the 12 core problems):

1. Warm-up, in parallel: every core problem is compiled (max-autotune-no-cudagraphs
   and default mode) in its own process, only to fill Inductor's on-disk caches.
   Max-autotune costs 30-70 s of mostly CPU work per GEMM/conv problem; side by side
   the set compiles in about the time of its slowest member (transformer block, ~69 s).
   No timing is measured here: parallel processes would disturb it.
2. The GPU tests (tests/compile/test_gpu.py) in one process: compile through our
   capture code with eager / compiled / default-mode timings on an otherwise idle GPU,
   again from our content-hash cache (cache hit), identity re-stitch, triage.  The
   captured wrappers and segmentations are written out as CPU-test fixtures.
3. A short table; fixtures as one tarball (the device returns at most 8 files).

``--fixtures-first`` (~70 s): no warm-up; problems with committed fixtures are tested
from them (rehydrated, no compile) under pytest-xdist, and only core problems without
a fixture are compiled, each in its own process.
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


def _pytest(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(
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
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )


def merge_reports(directory: Path) -> dict:
    report: dict[str, dict] = {}
    for f in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        name = f.name.split(".")[0]
        report.setdefault(name, {}).update(json.loads(f.read_text()))
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu-out")))
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--warm-timeout", type=float, default=150.0)
    parser.add_argument(
        "--budget-s", type=float, default=300.0, help="stop starting tests after this"
    )
    parser.add_argument(
        "--fixtures-first",
        action="store_true",
        help="no warm-up: problems with committed fixtures are tested from them (xdist), the "
        "others are compiled in parallel processes, one per problem",
    )
    args = parser.parse_args()
    if args.warm:
        return warm_one(args.warm)
    started = time.time()
    from tests.compile.helpers import core_problems, fixture_names, problem_name

    core = core_problems()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    fixtures = out / "fixtures"
    report_dir = out / "report"
    env = dict(
        os.environ,
        KERNELOPT_GPU_REPORT_DIR=str(report_dir),
        KERNELOPT_FIXTURE_OUT=str(fixtures),
        KERNELOPT_GPU_DEADLINE=str(started + args.budget_s),
    )
    warm: list[dict] = []
    if args.fixtures_first:
        have = set(fixture_names())
        missing = [rel for rel in core if problem_name(rel) not in have]
        procs = []
        for i, rel in enumerate(missing):
            stem = Path(rel).stem.split("_", 1)[-1]
            procs.append(
                _pytest(
                    ["-k", stem],
                    dict(env, TORCHINDUCTOR_COMPILE_THREADS="6"),
                    out / f"pytest_compile{i}.log",
                )
            )
        # -k has no literal True: "True" would be matched as a name and select nothing.
        keyword = " and ".join(
            ["not test_compile_then_cache_hit"]
            + [f"not {Path(rel).stem.split('_', 1)[-1]}" for rel in missing]
        )
        procs.append(
            _pytest(
                ["-n", "3", "-k", keyword],
                env,
                out / "pytest_fixtures.log",
            )
        )
        codes = [p.wait() for p in procs]
        rc = max(codes) if codes else 0
    else:
        print(f"[gpu_compile] {len(core)} core problems, warm-up with {args.jobs} processes")
        warm = warm_all(core, args.jobs, args.warm_timeout)
        for w in warm:
            print(
                f"[warm] {w['problem']}: "
                + (f"{w['compile_s']:.1f} s" if w["ok"] else w["error"][:300])
            )
        print(f"[gpu_compile] warm-up done at {time.time() - started:.0f} s", flush=True)
        proc = _pytest(["--timeout=400"], env, out / "pytest.log")
        rc = proc.wait()
    for log in sorted(out.glob("pytest*.log")):
        text = log.read_text()
        tail = [ln for ln in text.splitlines() if not ln.startswith(("DEBUG", "INFO"))]
        print(f"--- {log.name}\n" + "\n".join(tail[-25:]), flush=True)
    report = merge_reports(report_dir)
    (out / "summary.json").write_text(json.dumps({"warm": warm, "report": report}, indent=2))
    if fixtures.is_dir():
        with tarfile.open(out / "fixtures.tar.gz", "w:gz") as tar:
            for f in sorted(fixtures.iterdir()):
                tar.add(f, arcname=f.name)
        for f in fixtures.iterdir():
            f.unlink()
        fixtures.rmdir()
    for f in report_dir.glob("*.json") if report_dir.is_dir() else []:
        f.unlink()
    print(table(warm, report), flush=True)
    print(f"[gpu_compile] total {time.time() - started:.0f} s, pytest rc {rc}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
