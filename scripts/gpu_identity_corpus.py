"""GPU run for issue 30: the identity corpus on the H200, then ``optimize`` on it.

Not part of CI (campaigns need the GPU worker).  Two sections, one per device call:

1. **verify** (about 3-5 min): every problem in ``tests/problems/identity``
   (the near-memory-limit one included) gets the identity candidate
   (``ModelNew = Model``) through the full four-gate cascade on ``cuda``, one
   reference bundle each, children forked from the zygote.  Every row must be
   accepted against the eager baseline (the candidate *is* the eager model, so gate 4
   must not find it slower, nor quarantine its timing).  Rows go to ``$OUT/identity.jsonl`` as they finish::

       source scripts/device_env.sh; python3 -m scripts.gpu_identity_corpus verify --deadline 540

2. **optimize**: ``kernelopt optimize`` machinery with the built-in proposer
   on the same problems, through ``scripts/gpu_e2e.py`` (server, workers,
   outcomes and histories under ``$OUT``).  A small built-in campaign takes
   ~2-3 min of the one GPU worker, so the 53 problems need several calls:
   ``--chunk K/N`` picks every N-th problem from K, and ``--resume`` continues
   a chunk in the next call on the warm machine (as gpu_e2e documents)::

       source scripts/device_env.sh; python3 -m scripts.gpu_identity_corpus optimize --chunk 0/8

   Then ``python3 -m scripts.gpu_identity_corpus summary $OUT`` checks that
   every campaign reached an outcome (optimized, matched or fallback), never a
   crash, and prints the table.  carry [".whl", ".device"] for this section.
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
CORPUS = sorted((ROOT / "tests" / "problems" / "identity").glob("*.py"))


def verify(deadline: float, out: Path, only: list[str] | None = None) -> int:
    """Section 1: four gates on the identity candidate of every corpus problem."""
    from gates.cascade import verify_candidate
    from gates.runner import fast_launch
    from kernelopt.contracts.verdicts import GateSettings

    started = time.monotonic()
    rows, failed = [], 0
    # The identity candidate is the eager model: against an eager baseline gate 4 must say
    # "matched" (against Inductor's it could honestly be slower, which proves nothing here).
    settings = GateSettings(device="cuda", baseline_mode="eager")
    with tempfile.TemporaryDirectory() as tmp, fast_launch("cuda"):
        for path in CORPUS:
            if only and path.stem not in only:
                continue
            if time.monotonic() - started > deadline:
                rows.append({"problem": path.stem, "skipped": "deadline"})
                continue
            candidate = Path(tmp) / f"{path.stem}_identity.py"
            candidate.write_text(path.read_text() + "\n\nModelNew = Model\n")
            t0 = time.monotonic()
            result = verify_candidate(path, candidate, settings, workdir=Path(tmp) / path.stem)
            row = {
                "problem": path.stem,
                "accepted": result.accepted,
                "category": result.category.value if result.category else None,
                "speedup": result.speedup,
                "reason": result.reason[:300],
                "evaluation": result.environment.get("evaluation", ""),
                "seconds": round(time.monotonic() - t0, 1),
                "timing": _timing_rounds(result),
            }
            failed += not result.accepted
            rows.append(row)
            with (out / "identity.jsonl").open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(f"{path.stem:32} {'ok' if result.accepted else 'REJECTED'} {row['seconds']} s")
    print(f"{len(rows) - failed} of {len(rows)} accepted")
    return 1 if failed else 0


def _timing_rounds(result: Any) -> dict[str, Any]:
    """Gate 4's rounds in short: each side's event and host ms per round, the CPUs they ran
    on, and the A/A order control, so a noisy or order-biased verdict can be read later."""
    perf = next((v for v in result.verdicts if v.gate.value == "performance"), None)
    if perf is None:
        return {}
    metrics = perf.metrics

    def side(name: str) -> list[dict[str, Any]]:
        return [
            {
                "event": r.get("event_ms"),
                "host": r.get("host_ms"),
                "host_batches": r.get("host_samples"),  # within a round, against across rounds
                "calls_per_batch": r.get("host_calls_per_batch"),
                "copies": r.get("host_copies_ms"),  # taken off each batch's raw time
                "raw": r.get("host_raw_ms"),
                "cpus": r.get("cpus"),
            }
            for r in metrics.get(name, {}).get("rounds", [])
        ]

    return {
        "baseline": side("baseline"),
        "candidate": side("candidate"),
        "order_control": metrics.get("order_control"),
    }


def optimize(chunk: str, deadline: float, resume: bool, plans: int, max_targets: int) -> int:
    """Section 2: campaigns with the built-in proposer, through gpu_e2e.py.

    The point is that every problem reaches an outcome, so the search is the smallest
    one by default (one plan, one target), to fit 53 campaigns into few device calls.
    """
    k, n = (int(x) for x in chunk.split("/"))
    problems = [str(p) for p in CORPUS[k::n]]
    cmd = [sys.executable, "-m", "scripts.gpu_e2e", "--deadline", str(deadline)]
    cmd += ["--plans", str(plans), "--max-targets", str(max_targets)]
    cmd += ["--resume"] if resume else []
    return subprocess.call([*cmd, *problems], cwd=ROOT)


def summary(out: Path) -> int:
    """Every campaign in gpu_e2e's ``table.json`` ended with an outcome (never an error).

    Its rows are ``[campaign id, category | "unfinished" | "error", ...]``: an
    unfinished one ran out of the call's time (``--resume`` it), an error is a crash.
    """
    rows = json.loads((out / "table.json").read_text())
    for row in rows:
        print("  ".join(str(x) for x in row))
    errors = [row[0] for row in rows if row[1] == "error"]
    unfinished = [row[0] for row in rows if row[1] == "unfinished"]
    print(
        f"{len(rows) - len(errors) - len(unfinished)} of {len(rows)} reached an outcome; "
        f"errors: {errors or 'none'}; unfinished (resume them): {unfinished or 'none'}"
    )
    return 1 if errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="section", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--deadline", type=float, default=540.0)
    v.add_argument("--only", default="", help="comma-separated problem names (default: all)")
    o = sub.add_parser("optimize")
    o.add_argument("--chunk", default="0/8")
    o.add_argument("--deadline", type=float, default=540.0)
    o.add_argument("--resume", action="store_true")
    o.add_argument("--plans", type=int, default=1)
    o.add_argument("--max-targets", type=int, default=1)
    s = sub.add_parser("summary")
    s.add_argument("out", type=Path)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/gpu-identity-out"))
    out.mkdir(parents=True, exist_ok=True)
    if args.section == "verify":
        return verify(args.deadline, out, [n for n in args.only.split(",") if n])
    if args.section == "optimize":
        return optimize(args.chunk, args.deadline, args.resume, args.plans, args.max_targets)
    return summary(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
