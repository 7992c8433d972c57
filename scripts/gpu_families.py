"""The built-in proposer's new families (templates, rewrites, regeneration) through the gates.

    source scripts/device_env.sh; python -m scripts.gpu_families [PROBLEM.py ...]   # under $OUT

For each problem: compile the baseline (max-autotune, as a campaign does), segment it,
ask the built-in proposer for candidates -- kernel targets for templates (every Triton
kernel as its own target, as the workflow does for the built-in proposer), the forward
target for rewrites and Inductor regenerations -- keep only the new families'
candidates, and put each through ``gates.campaign.gate_candidate`` (gates 1-2 plus the
forward timing a campaign ranks by).  Prints one row per candidate: problem, family,
label, verdict, speedup (baseline forward ms / candidate forward ms, from the gate's own
timing; blank when the gate did not time it).  Nothing here is a speed claim until it has run on the GPU.

Environment: FAMILIES_PER_TARGET (default 2 candidates per target and family),
FAMILIES_BUDGET_S (default 520: no new gate starts after it), FAMILIES_ONLY (label prefixes,
comma-separated, e.g. ``template:scan``: gate only those candidates). Results:
$OUT/families.json, $OUT/families.txt.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OUT = Path(os.environ.get("OUT") or ROOT / ".gpu_families_out")
OUT.mkdir(parents=True, exist_ok=True)
PER_TARGET = int(os.environ.get("FAMILIES_PER_TARGET", "2"))
BUDGET_S = float(os.environ.get("FAMILIES_BUDGET_S", "520"))
ONLY = tuple(p for p in os.environ.get("FAMILIES_ONLY", "").split(",") if p) or (
    "template:",
    "rewrite:",
    "regen:",
)
STARTED = time.monotonic()
# where the families apply (the script picks problems; the proposer never sees these names)
DEFAULT = [
    "problems/level1/009_softmax_rows.py",
    "problems/level1/023_diag_matmul.py",
    "problems/level1/010_log_softmax_wide.py",
    "problems/level1/011_layernorm.py",
    "problems/level1/012_rmsnorm.py",
    "problems/level1/016_argmax_dim.py",
    "problems/level1/013_sum_middle_dim.py",
    "problems/level1/027_batched_diag_matmul.py",
    "problems/level1/017_cumsum.py",
]
ROWS: list[dict] = []


def save() -> None:
    (OUT / "families.json").write_text(json.dumps(ROWS, indent=1, default=str))
    head = f"{'problem':32} {'family':9} {'label':48} {'verdict':10} speedup"
    lines = [head] + [
        f"{r['problem'][:32]:32} {r['family']:9} {r['label'][:48]:48} {r['verdict']:10} "
        + (f"{r['speedup']:.3f}x" if r.get("speedup") else "")
        for r in ROWS
    ]
    (OUT / "families.txt").write_text("\n".join(lines) + "\n")


def candidates(compiled, seg, store):
    """(target, variant) pairs of the template and rewrite families."""
    from kernelopt.contracts.compiled import SearchTarget, TargetKind
    from kernelopt.contracts.search import BuiltinProposeInput
    from kernelopt.proposer.builtin import propose
    from kernelopt.proposer.targets import rewrite_target

    # as a built-in campaign does: the forward for rewrites, every kernel for templates
    targets = [rewrite_target(compiled, seg, seg.targets)]
    targets += [
        SearchTarget(
            id=k.name, kind=TargetKind.KERNEL, kernels=[k.name], source=k.source, signature=k.args
        )
        for k in seg.kernels
    ]
    for target in targets:
        source = target.source or compiled.problem.source
        result = propose(
            BuiltinProposeInput(
                compiled=compiled,
                segment=seg,
                target=target,
                state_source=source,
                count=2 * PER_TARGET,
            ),
            store,
        )
        new = [v for v in result.variants if v.label.startswith(ONLY)]
        for variant in new[:PER_TARGET]:
            yield target, variant


def run_problem(path: str, store) -> None:
    from kernelopt.compile.segment import segment
    from kernelopt.contracts.compiled import CompileInput, SegmentInput
    from kernelopt.contracts.problem import ProblemSpec
    from kernelopt.kinds.registry import compile_problem
    from tests.support.gating import gate_source

    name = Path(path).stem
    spec = ProblemSpec(
        name=name, source=store.put_text((ROOT / path).read_text(), name=f"{name}.py"), path=path
    )
    t0 = time.monotonic()
    compiled = compile_problem(CompileInput(problem=spec, measure_default_mode=False), store)
    seg = segment(SegmentInput(compiled=compiled), store)
    print(f"{name}: compiled in {time.monotonic() - t0:.0f} s, mode {seg.mode.value}", flush=True)
    found = list(candidates(compiled, seg, store))
    if not found:
        ROWS.append({"problem": name, "family": "-", "label": "no candidate", "verdict": "-"})
    for i, (target, variant) in enumerate(found):
        if time.monotonic() - STARTED > BUDGET_S:
            ROWS.append(
                {"problem": name, "family": "-", "label": variant.label, "verdict": "skipped"}
            )
            continue
        t1 = time.monotonic()
        gated = gate_source(store, compiled, seg, target, variant.source, f"fam{i}", timeout_s=120)
        speedup = None
        if gated.kernel_ms and gated.baseline_kernel_ms:
            speedup = gated.baseline_kernel_ms / gated.kernel_ms
        failed = [v for v in gated.verdicts if not v.passed]
        ROWS.append(
            {
                "problem": name,
                "family": variant.label.split(":")[0],
                "label": variant.label,
                "target": target.id,
                "verdict": "pass" if gated.passed else (failed[0].gate.value if failed else "fail"),
                "reason": failed[0].reason[:300] if failed else "",
                "speedup": speedup,
                "kernel_ms": gated.kernel_ms,
                "baseline_kernel_ms": gated.baseline_kernel_ms,
                "seconds": round(time.monotonic() - t1, 1),
            }
        )
        save()


def main() -> int:
    from kernelopt.store import open_store

    store = open_store()
    for path in sys.argv[1:] or DEFAULT:
        if time.monotonic() - STARTED > BUDGET_S:
            ROWS.append(
                {"problem": Path(path).stem, "family": "-", "label": "-", "verdict": "skipped"}
            )
            continue
        try:
            run_problem(path, store)
        except Exception:  # one broken problem must not hide the others' rows
            ROWS.append(
                {
                    "problem": Path(path).stem,
                    "family": "-",
                    "label": "error",
                    "verdict": "error",
                    "reason": traceback.format_exc()[-600:],
                }
            )
        save()
    save()
    print((OUT / "families.txt").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
