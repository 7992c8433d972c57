"""Seconds to the first verdict of a cold ``kernelopt verify PROBLEM --candidate A.py B.py ...``.

Issue 22 point 3 asks that a cold standalone batch reaches its first verdict within 30 s
of wall time once the baseline is cached.  This runs the real command as a user would,
in a fresh process each time, with one ``KERNELOPT_HOME`` for all runs: the first run
fills the compiler caches there, the later ones are the cold standalone runs with the
baseline cached.  For each run it keeps the seconds from the start of the process to
each row the command prints as a candidate's verdict lands, and each of its "[N s]" stage lines
(the zygote ready, the shared reference, the timing begun), the exit code, and the last
lines of its output::

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m scripts.gpu_batch_verify --runs 3 swish_bias swish_fused lazy_output partial_write
    # -> $OUT/batch_verify.json, and a table on stdout

The problem is one of ``tests/problems/gates``, the candidates are files of
``tests/fixtures/candidates/gates``.  ``--device cpu`` runs it on the CPU (no speed
verdict; a check of the script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems" / "gates"
CANDIDATES = ROOT / "tests" / "fixtures" / "candidates" / "gates"


def one_run(problem: Path, candidates: list[Path], home: Path, device: str) -> dict[str, Any]:
    """One ``kernelopt verify`` process: when each candidate's row appeared, and how it ended."""
    cmd = [sys.executable, "-m", "kernelopt.cli", "verify", str(problem), "--candidate"]
    cmd += [str(c) for c in candidates] + ["--device", device]
    env = {**os.environ, "KERNELOPT_HOME": str(home), "COLUMNS": "200"}
    names = {c.name for c in candidates}
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []  # the command's "[N s] ..." lines: where the time went
    tail: list[str] = []
    with subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            at = time.monotonic() - started
            tail = [*tail[-30:], line.rstrip()]
            if line.startswith("[") and " s] " in line:
                stages.append({"seconds": round(at, 2), "stage": line.split("] ", 1)[1].strip()})
            first = line.split(" | ", 1)[0].strip()
            if " | " in line and first in names and first not in {r["candidate"] for r in rows}:
                rows.append({"candidate": first, "seconds": round(at, 2), "row": line.strip()})
        code = proc.wait()
    return {
        "exit": code,
        "seconds": round(time.monotonic() - started, 2),
        "rows": rows,
        "stages": stages,
        "first_verdict_s": rows[0]["seconds"] if rows else None,
        "tail": tail,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", help="a problem of tests/problems/gates, by name")
    parser.add_argument("candidates", nargs="+", help="candidates of tests/fixtures, by name")
    parser.add_argument("--runs", type=int, default=3, help="the first one fills the caches")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    problem = PROBLEMS / f"{args.problem}.py"
    candidates = [CANDIDATES / f"{name}.py" for name in args.candidates]
    out = Path(os.environ.get("OUT", "."))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="batch-verify-home-") as home:
        for i in range(args.runs):
            run = one_run(problem, candidates, Path(home), args.device)
            run["label"] = "fills the caches" if i == 0 else "baseline cached"
            runs.append(run)
            (out / "batch_verify.json").write_text(json.dumps(runs, indent=1))
            print(
                f"run {i} ({run['label']}): exit {run['exit']}, first verdict at "
                f"{run['first_verdict_s']} s, all {len(run['rows'])} rows by "
                f"{run['rows'][-1]['seconds'] if run['rows'] else '-'} s, process "
                f"{run['seconds']} s",
                flush=True,
            )
    return 0 if all(r["rows"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
