"""Where the time of one ``gate_candidate`` goes, on the GPU host (one device call).

    source scripts/device_env.sh; python3 -m scripts.gpu_gate_cost   # writes $OUT/gate_cost.json

For committed H200 fixtures (rehydrated, no compile) one identity candidate (the
target's own kernel source) goes through ``gates.campaign.gate_candidate`` a few
times: cold, warm, and -- when ``--zygote`` is given -- with jobs forked from a
preloaded zygote.  Each run keeps the result's ``stage_seconds`` (every gate
child's progress phases included), so the table says which process costs what.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIXTURES = ROOT / "tests" / "fixtures" / "wrappers"


def _inputs(fixture: str, problem: Path, store):
    from kernelopt.compile.rehydrate import rehydrate
    from kernelopt.compile.segment import segment
    from kernelopt.contracts.compiled import CompileResult, SegmentInput, TargetKind

    recorded = CompileResult.model_validate_json((FIXTURES / f"{fixture}.compile.json").read_text())
    wrapper = (FIXTURES / f"{fixture}.py.txt").read_text()
    compiled = rehydrate(recorded, problem.read_text(), wrapper, store)
    seg = segment(SegmentInput(compiled=compiled), store)
    target = next(t for t in seg.targets if t.kind == TargetKind.KERNEL)
    return compiled, seg, target


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--zygote", action="store_true")
    args = parser.parse_args()
    fixtures = args.fixture or ["level1_001_relu_chain", "level2_005_conv_gelu_global_mean"]
    out = Path(os.environ.get("OUT") or ROOT / ".gpu_gate_cost")
    out.mkdir(parents=True, exist_ok=True)

    from gates.runner import fast_launch
    from kernelopt.store import open_store
    from tests.support.gating import gate_source

    store = open_store(Path(os.environ.get("KERNELOPT_HOME", "/tmp/kernelopt-home")) / "store")
    rows = []
    modes = ["spawn"] + (["zygote"] if args.zygote else [])
    for mode in modes:
        ctx = fast_launch("cuda") if mode == "zygote" else None
        launch = ctx.__enter__() if ctx else None
        try:
            for fixture in fixtures:
                level, number, *rest = fixture.split("_")
                problem = ROOT / "problems" / level / f"{number}_{'_'.join(rest)}.py"
                compiled, seg, target = _inputs(fixture, problem, store)
                for i in range(args.repeat):
                    t0 = time.monotonic()
                    result = gate_source(
                        store,
                        compiled,
                        seg,
                        target,
                        target.source,
                        f"cost-{mode}-{i}",
                        timeout_s=180,
                    )
                    row = {
                        "mode": mode,
                        "launch": str(getattr(launch, "note", "")),
                        "fixture": fixture,
                        "run": i,
                        "total_s": round(time.monotonic() - t0, 2),
                        "passed": result.passed,
                        "kernel_ms": result.kernel_ms,
                        "baseline_kernel_ms": result.baseline_kernel_ms,
                        "stages": result.stage_seconds,
                    }
                    rows.append(row)
                    (out / "gate_cost.json").write_text(json.dumps(rows, indent=1, default=str))
                    main = {k: v for k, v in result.stage_seconds.items() if "." not in k}
                    kids = " ".join(f"{k}={v:.1f}" for k, v in main.items())
                    sys.stdout.write(
                        f"{mode:6} {fixture:36} run{i} total={row['total_s']:6.1f}s "
                        f"passed={result.passed} {kids}\n"
                    )
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
