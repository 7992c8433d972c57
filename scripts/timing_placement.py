"""Do slow timing rounds sit on CPUs far from the GPU?  Read from a results folder.

    python3 scripts/timing_placement.py docs/results/h200

For every model-level performance verdict in the outcomes (``model_verdicts``),
each fresh-process round's time with the CPUs it ran on, their NUMA nodes and
the GPU's node (``gates.placement``; rounds from before it was recorded show
none).  Ends with one line per (CPU node == GPU node) group: the median over
problems of round time / that problem's median round -- above 1 on the remote
side means placement explains part of the spread.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelopt.bench.results import load_results  # noqa: E402


def main(results_dir: str) -> int:
    relative: dict[str, list[float]] = {}
    for result in load_results(results_dir):
        for verdict in result.outcome.model_verdicts:
            for side in ("baseline", "candidate"):
                rounds = (verdict.metrics.get(side) or {}).get("rounds") or []
                times = [r["primary_ms"] for r in rounds if r.get("primary_ms")]
                if len(times) < 2:
                    continue
                mid = statistics.median(times)
                for r in rounds:
                    nodes = [n for n in r.get("cpu_nodes") or [] if n is not None]
                    gpu = r.get("gpu_node")
                    where = (
                        "unknown"
                        if not nodes or gpu is None
                        else ("gpu-local" if all(n == gpu for n in nodes) else "remote/mixed")
                    )
                    relative.setdefault(where, []).append(r["primary_ms"] / mid)
                    print(
                        f"{result.name:32} {side:9} {r['primary_ms'] * 1000:8.1f} us "
                        f"cpus {r.get('cpus')} nodes {r.get('cpu_nodes')} gpu node {gpu}"
                    )
    for where, values in sorted(relative.items()):
        print(
            f"{where:13} rounds {len(values):4}  median time/problem median "
            f"{statistics.median(values):.3f}  max {max(values):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/h200"))
