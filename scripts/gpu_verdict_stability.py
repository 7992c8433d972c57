"""Is gate 4's verdict stable?  One candidate, one reference, the timing repeated N times.

Usage on the GPU host, from the repository root (device_env.sh puts it on PYTHONPATH;
docs/TEAM_NOTES.md says how to carry the wheels):

    source scripts/device_env.sh
    python3 -m scripts.gpu_verdict_stability PROBLEM CANDIDATE [N]

PROBLEM and CANDIDATE name files of tests/problems/gates and tests/fixtures/candidates/gates.
Gates 1-3 run once; gate 4 (every timed call checked) runs N times on the same
reference.  Prints one line per verdict (category, speedup, its interval, noise,
device-seconds) and writes $OUT/stability_CANDIDATE.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from gates.cascade import check_candidate, time_candidate
from gates.reference import prepare_reference
from gates.runner import fast_launch
from tests.gates.test_gpu_adversarial import gpu_settings
from tests.support.adversarial import CANDIDATES, PROBLEMS


def main(argv: list[str]) -> int:
    os.environ["KERNELOPT_GATES_SMALL"] = "0"  # full sizes (the test problems read it at import)
    problem, candidate = argv[0], argv[1]
    repeats = int(argv[2]) if len(argv) > 2 else 10
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp())
    settings = gpu_settings()
    work = Path(tempfile.mkdtemp(prefix="stability-"))
    rows = []
    with fast_launch("cuda"):
        bundle = prepare_reference(PROBLEMS / f"{problem}.py", settings, work / "reference")
        checked = check_candidate(bundle, CANDIDATES / f"{candidate}.py", settings, work)
        if not checked.accepted and checked.deciding_gate is not None:
            print(f"gates 1-3 rejected it: {checked.reason}", flush=True)
            return 1
        for i in range(repeats):
            started = time.monotonic()
            r = time_candidate(checked, bundle, settings, work / f"run{i}")
            v4 = r.verdicts[-1]
            noise = (v4.metrics.get("decision") or {}).get("noise")
            row = {
                "run": i,
                "status": v4.status.value,
                "category": r.category.value if r.category else None,
                "speedup": r.speedup,
                "interval": r.speedup_interval,
                "noise": noise,
                "gpu_work": (v4.metrics.get("gpu_work") or {}).get("speedup"),
                "gate": v4.gate.value,
                "reason": v4.reason[:400],
                "gpu_seconds": round(v4.gpu_seconds, 2),
                "rounds_ms": {
                    side: [x["primary_ms"] for x in (v4.metrics.get(side) or {}).get("rounds", [])]
                    for side in ("baseline", "candidate")
                },
                "wall_s": round(time.monotonic() - started, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / f"stability_{candidate}.json").write_text(json.dumps(rows, indent=1))
    categories = {(r["status"], r["category"]) for r in rows}
    print(f"{candidate}: {len(rows)} verdicts, outcomes {sorted(map(str, categories))}")
    return 0 if len(categories) == 1 else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
