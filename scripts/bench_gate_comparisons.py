"""What gates 2 and 3's parent-side comparisons cost per verdict, before and after (issue 22).

``python scripts/bench_gate_comparisons.py [--sets 6] [--shape 4096 2048] [--candidates 4]
[--magnitude 1] [--before tests/support/numerics_before.py | --before-rev REV] [--no-before]``

Builds synthetic reference outputs (an fp32 baseline and its float64 twin per input
set) and candidates against them: honest ones (relative noise of fp32 rounding), an
"edge" one (offset by gate 3's tolerance: it passes, but only after gate 3 checks
closeness element by element) and a biased one (passes gate 2, fails gate 3).  Each
is judged as the cascade judges it, on one comparison thread: gate 2
(``compare_outputs`` per set) then gate 3 (``model_verdict_from_sets``), all against
one reference, so the reference's own numbers are computed for the first candidate
and reused after.

"Before" is the straightforward implementation: the frozen copy the tests check
against (default), or ``gates/numerics.py`` at a git revision (``--before-rev``).
It is timed on the first, the edge and the biased candidate (it keeps nothing per
reference), and every report it gives must equal the fast path's, bit for bit.
CPU only; prints a table of seconds per verdict, progress on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from gates.model_gate import model_verdict_from_sets  # noqa: E402
from gates.numerics import compare_outputs, comparison_threads  # noqa: E402
from gates.reference_facts import ReferenceFacts  # noqa: E402
from kernelopt.contracts.verdicts import GateSettings  # noqa: E402

SET_NAMES = ["seed0", "seed1", "seed2", "heldout", "newvals", "holdout"]


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


def load_before(path: str, rev: str) -> ModuleType:
    """The straightforward comparisons: a file, or gates/numerics.py at a git revision."""
    if not rev:
        return _load_module(REPO / path, "numerics_before")
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:gates/numerics.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-numerics-") as tmp:
        path = Path(tmp) / "numerics_at_rev.py"
        path.write_text(source)
        return _load_module(path, "numerics_at_rev")


def build_sets(
    n_sets: int, shape: tuple[int, ...], seed: int, magnitude: float
) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, fp32 baseline, float64 baseline) per input set; the fp32 one has its own rounding."""
    gen = torch.Generator().manual_seed(seed)
    sets = []
    for i in range(n_sets):
        b64 = magnitude * torch.randn(shape, generator=gen, dtype=torch.float64)
        b32 = (b64 * (1 + 1e-7 * torch.randn(shape, generator=gen, dtype=torch.float64))).float()
        name = SET_NAMES[i] if i < len(SET_NAMES) else f"set{i}"
        sets.append((name, b32, b64))
    return sets


def build_candidate(
    sets: list[tuple[str, torch.Tensor, torch.Tensor]], seed: int, bias: float
) -> dict[str, torch.Tensor]:
    """Relative noise of ~1e-6 (fp32 rounding through a few layers), plus ``bias``."""
    gen = torch.Generator().manual_seed(seed)
    return {
        name: b32 + 1e-6 * torch.randn(b32.shape, generator=gen) * b32.abs() + bias
        for name, b32, _ in sets
    }


def judge(
    compare: Any,
    model_rule: Any,
    sets: list[tuple[str, torch.Tensor, torch.Tensor]],
    outs: dict[str, torch.Tensor],
    settings: GateSettings,
    facts: ReferenceFacts | None,
) -> tuple[float, float, list[Any], list[Any]]:
    """Gate 2 then gate 3 on every set as the cascade runs them: (s gate 2, s gate 3, reports)."""
    tol = {"rtol": settings.rtol, "atol": settings.atol, "scale_tol": settings.scale_tol}
    rule = {
        "tolerance": settings.model_tolerance,
        "rho_max": settings.rho_max,
        "d_ref_floor": settings.d_ref_floor,
        "abs_bound": settings.model_abs_bound,
    }
    extra = {"facts": facts} if facts is not None else {}
    with comparison_threads():
        started = time.perf_counter()
        gate2 = [compare([outs[name]], [b32], **tol, **extra) for name, b32, _ in sets]
        mid = time.perf_counter()
        if model_rule is None:  # the library's own gate 3 verdict
            verdict = model_verdict_from_sets(
                [(name, [outs[name]], [b32], [b64]) for name, b32, b64 in sets],
                tolerance=settings.model_tolerance,
                rho_max=settings.rho_max,
                settings=settings,
                facts=facts,
            )
            gate3 = [{k: v for k, v in s.items() if k != "set"} for s in verdict.metrics["sets"]]
        else:
            gate3 = [
                model_rule([outs[name]], [b32], [b64], **rule).as_dict() for name, b32, b64 in sets
            ]
        done = time.perf_counter()
    return mid - started, done - mid, [c.as_dict() for c in gate2], gate3


def same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (NaN equal to NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        if a != a or b != b:
            return a != a and b != b
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--shape", type=int, nargs="+", default=[4096, 2048])
    parser.add_argument(
        "--candidates", type=int, default=4, help="honest ones (an edge and a biased one follow)"
    )
    parser.add_argument("--before", default="tests/support/numerics_before.py")
    parser.add_argument("--before-rev", default="", help="time gates/numerics.py at this rev")
    parser.add_argument("--no-before", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--magnitude",
        type=float,
        default=1.0,
        help="scale of the outputs: 1000 puts honest errors over gate 3's 1e-4, so its "
        "closeness is checked element by element",
    )
    args = parser.parse_args()

    settings = GateSettings()
    shape = tuple(args.shape)
    sets = build_sets(args.sets, shape, args.seed, args.magnitude)
    numel = math.prod(shape)
    print(
        f"{args.sets} sets x {'x'.join(map(str, shape))} float32 ({numel / 1e6:.1f}M elements "
        f"each) + float64 baselines; torch {torch.__version__}, 1 comparison thread",
        file=sys.stderr,
    )
    candidates = [(f"honest{i}", 0.0) for i in range(max(1, args.candidates))]
    candidates.append(("edge", 1e-4 * args.magnitude))  # gate 3 checks closeness everywhere
    candidates.append(("biased", 5e-4 * args.magnitude))  # fails gate 3
    before = None if args.no_before else load_before(args.before, args.before_rev)

    rows: dict[str, tuple[float, float]] = {}
    facts = ReferenceFacts()
    later: list[tuple[float, float]] = []
    mismatches = 0
    for k, (label, bias) in enumerate(candidates):
        outs = build_candidate(sets, args.seed + 1 + k, bias)
        g2, g3, rep2, rep3 = judge(compare_outputs, None, sets, outs, settings, facts)
        ok = all(r["ok"] for r in rep2) and all(r["ok"] for r in rep3)
        print(
            f"after  {label:8s} gate 2 {g2:6.3f} s  gate 3 {g3:6.3f} s  ({'pass' if ok else 'fail'})",
            file=sys.stderr,
        )
        special = k == 0 or label in ("edge", "biased")
        if k == 0:
            rows["after: first candidate of the reference"] = (g2, g3)
        elif special:
            rows[f"after: {label}"] = (g2, g3)
        else:
            later.append((g2, g3))
        if before is not None and special:
            b2, b3, old2, old3 = judge(
                before.compare_outputs, before.model_error_rule, sets, outs, settings, None
            )
            print(f"before {label:8s} gate 2 {b2:6.3f} s  gate 3 {b3:6.3f} s", file=sys.stderr)
            rows[f"before: {'honest' if k == 0 else label}"] = (b2, b3)
            if not (same(old2, rep2) and same(old3, rep3)):
                mismatches += 1
                print(f"MISMATCH: {label}'s reports differ before/after", file=sys.stderr)
        del outs
    if later:
        rows[f"after: later candidates (median of {len(later)})"] = (
            statistics.median(g for g, _ in later),
            statistics.median(m for _, m in later),
        )

    print(f"\nseconds per verdict ({args.sets} sets of {numel / 1e6:.1f}M elements, 1 thread)")
    print(f"{'':44s} {'gate 2':>8s} {'gate 3':>8s} {'both':>8s}")
    order = ["before: honest", "after: first", "after: later"]
    order += ["before: edge", "after: edge", "before: biased", "after: biased"]
    for prefix in order:
        for name, (g2, g3) in rows.items():
            if name.startswith(prefix):
                print(f"{name:44s} {g2:8.3f} {g3:8.3f} {g2 + g3:8.3f}")
    if before is not None:
        print("reports identical before/after: " + ("yes" if mismatches == 0 else "NO"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
