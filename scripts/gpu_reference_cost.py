"""What one reference child costs, and how much of it the scratch directory's disk decides.

    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m scripts.gpu_reference_cost --runs 2 problems/unseen/006_gated_residual_rmsnorm.py
    # -> $OUT/reference_cost.jsonl (a row per run as it ends), and a table on stdout

Each run prepares the reference of a problem (``gates.reference.prepare_reference``, the
same child a ``gate_candidate`` runs) in a fresh directory under each scratch root in turn
(``--roots``; default: the temporary directory and ``/dev/shm``), alternating the roots so
that a drift of the host hits both.  A row keeps the wall seconds, the child's progress
phases and the bytes the child left on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def _bytes_under(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def one_run(problem: Path, root: Path, device: str) -> dict[str, Any]:
    """One reference child in a fresh directory under ``root``."""
    from gates.reference import prepare_reference
    from kernelopt.contracts.verdicts import GateSettings

    work = Path(tempfile.mkdtemp(prefix="kernelopt-refcost-", dir=root))
    try:
        started = time.monotonic()
        bundle = prepare_reference(problem, GateSettings(device=device), work, keep_refs=True)
        wall = time.monotonic() - started
        return {
            "problem": problem.name,
            "root": str(root),
            "ok": bundle.ok,
            "wall_s": round(wall, 2),
            "bytes": _bytes_under(work),
            "phases": bundle.outcome.phase_seconds("ref"),
            "error": None if bundle.ok else str(bundle.outcome.error)[:300],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--roots", nargs="+", type=Path)
    args = parser.parse_args()
    roots = args.roots or [Path(tempfile.gettempdir()), Path("/dev/shm")]
    out = Path(os.environ.get("OUT", ".")) / "reference_cost.jsonl"
    rows = []
    with out.open("a") as sink:
        for problem in args.problems:
            for _ in range(args.runs):
                for root in roots:
                    row = one_run(problem, root, args.device)
                    rows.append(row)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    print(
                        f"{row['problem']:<40} {row['root']:<10} ok={row['ok']} "
                        f"{row['wall_s']:>7.1f} s {row['bytes'] / 1e9:6.2f} GB",
                        flush=True,
                    )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
