"""What gates 2 and 3's parent-side comparisons cost per verdict (issue 22).

``python -m scripts.bench_gate_comparisons [--sets 6] [--shape 4096 2048] [--candidates 4]
[--magnitude 1]``

Builds synthetic reference outputs (an fp32 baseline and its float64 twin per input
set) and candidates against them: honest ones (relative noise of fp32 rounding), an
"edge" one (offset by gate 3's tolerance: it passes, but only after gate 3 checks
closeness element by element), a biased one (passes gate 2, fails gate 3) and a
poisoned one (the last 1% of every output never written: NaN).  Each
is judged as the cascade judges it, on one comparison thread: gate 2
(``compare_outputs`` per set) then gate 3 (``model_verdict_from_sets``), all against
one reference, so the reference's own numbers are computed for the first candidate
and reused after.

To compare with an older version, run this script from a checkout of it (``git
worktree add``); the reports themselves are held to golden ones by
``tests/gates/test_numerics_fast.py``.  CPU only; prints a table of seconds per
verdict, progress on stderr.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import torch

from gates.model_gate import model_verdict_from_sets
from gates.numerics import compare_outputs, comparison_threads
from gates.reference_facts import ReferenceFacts
from kernelopt.contracts.verdicts import GateSettings

SET_NAMES = ["seed0", "seed1", "seed2", "heldout", "newvals", "holdout"]


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
    sets: list[tuple[str, torch.Tensor, torch.Tensor]],
    outs: dict[str, torch.Tensor],
    settings: GateSettings,
    facts: ReferenceFacts,
) -> tuple[float, float, bool]:
    """Gate 2 then gate 3 on every set as the cascade runs them: (s gate 2, s gate 3, passed)."""
    tol = {"rtol": settings.rtol, "atol": settings.atol, "scale_tol": settings.scale_tol}
    with comparison_threads():
        started = time.perf_counter()
        gate2 = [compare_outputs([outs[name]], [b32], **tol, facts=facts) for name, b32, _ in sets]
        mid = time.perf_counter()
        verdict = model_verdict_from_sets(
            [(name, [outs[name]], [b32], [b64]) for name, b32, b64 in sets],
            tolerance=settings.model_tolerance,
            rho_max=settings.rho_max,
            settings=settings,
            facts=facts,
        )
        done = time.perf_counter()
    ok = all(c.ok for c in gate2) and all(s["ok"] for s in verdict.metrics["sets"])
    return mid - started, done - mid, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--shape", type=int, nargs="+", default=[4096, 2048])
    parser.add_argument(
        "--candidates", type=int, default=4, help="honest ones (an edge and a biased one follow)"
    )
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
    candidates.append(("poisoned", 0.0))  # its last 1% never written: NaN, fails both

    rows: dict[str, tuple[float, float]] = {}
    facts = ReferenceFacts()
    later: list[tuple[float, float]] = []
    for k, (label, bias) in enumerate(candidates):
        outs = build_candidate(sets, args.seed + 1 + k, bias)
        if label == "poisoned":
            for out in outs.values():
                out.view(-1)[-(out.numel() // 100) :] = math.nan
        g2, g3, ok = judge(sets, outs, settings, facts)
        print(
            f"{label:8s} gate 2 {g2:6.3f} s  gate 3 {g3:6.3f} s  ({'pass' if ok else 'fail'})",
            file=sys.stderr,
        )
        if k == 0:
            rows["first candidate of the reference"] = (g2, g3)
        elif label in ("edge", "biased", "poisoned"):
            rows[label] = (g2, g3)
        else:
            later.append((g2, g3))
        del outs
    if later:
        rows[f"later candidates (median of {len(later)})"] = (
            statistics.median(g for g, _ in later),
            statistics.median(m for _, m in later),
        )

    print(f"\nseconds per verdict ({args.sets} sets of {numel / 1e6:.1f}M elements, 1 thread)")
    print(f"{'':44s} {'gate 2':>8s} {'gate 3':>8s} {'both':>8s}")
    for name, (g2, g3) in rows.items():
        print(f"{name:44s} {g2:8.3f} {g3:8.3f} {g2 + g3:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
