"""GPU run for issue 9: standalone Triton and Helion kernel problems, end to end, on the H200.

One device call does both sections (about 5-6 minutes with the defaults)::

    source scripts/device_env.sh; \
    python3 -m pip install -q --no-index --no-deps --target /tmp/site-helion .whl-helion/*.whl; \
    PYTHONPATH=/tmp/site-helion:$PYTHONPATH python3 scripts/gpu_kinds.py --deadline 540

with ``carry [".whl", ".whl-helion"]``.  ``.whl-helion`` (ignored by git) holds
``pip download --no-deps helion packaging rich pygments markdown-it-py mdurl``;
without it the Helion problem is reported as skipped and the rest still runs.
Helion's default autotuner needs scikit-learn, which we do not carry, so the
script sets ``HELION_AUTOTUNER=PatternSearch`` unless it can import sklearn.

Sections, in order (each writes its rows to ``$OUT/kinds.jsonl`` as it goes,
so a deadline or a crash still leaves what was measured):

1. **baseline** -- the compile step (``kernelopt.kinds.compile`` through
   ``compile_on`` on ``cuda``) for each problem: the runtime checks on the GPU,
   the baseline (Helion: autotuned at the file's ``AUTOTUNE_EFFORT``, seconds
   recorded), eager-reference / baseline / wrapper times (do_bench medians).
   Then the rejections on a real GPU: 2 TiB of inputs, a nondeterministic
   reference, a kernel that does not compute its reference.
2. **verify** -- for each problem the built-in proposer's first variants
   (``kernelopt.kinds.builtin``) through the full four-gate cascade of
   ``kernelopt verify`` (one reference bundle per problem, fresh timing
   processes, zygote launcher): gates, baseline ms, candidate ms, speedup.

Campaigns of these kinds run through ``scripts/gpu_e2e.py`` (the same script
as for modules: it takes any problem file, keeps server and workers alive into
the next call with ``--keep-workers`` / ``--resume``, and dumps histories).  On
the H200 one Helion campaign needs ~4-5 min of the GPU worker (Helion
autotunes in compile, ~90 s), more than fits beside other work in one call.

``--device cpu --problems tests/kinds/problems/scale_add.py`` runs sections 1-2
under the Triton interpreter (a smoke test of this script on a CPU machine).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_PROBLEMS = [
    "problems/triton/001_add_relu.py",
    "problems/triton/002_rmsnorm_rows.py",
    "problems/helion/001_rmsnorm.py",
]
BAD_PROBLEMS = {
    "huge_inputs": "do not fit in GPU memory",
    "noisy_reference": "not deterministic",
    "wrong_kernel": "does not compute its reference",
}


class Recorder:
    """Rows to stdout and to $OUT/kinds.jsonl, as they happen."""

    def __init__(self, out: Path, started: float, deadline: float) -> None:
        self.out = out
        self.path = out / "kinds.jsonl"
        self.started = started
        self.deadline = deadline
        self.rows: list[dict[str, Any]] = []

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.started)

    def row(self, section: str, **fields: Any) -> None:
        record = {"section": section, "t": round(time.monotonic() - self.started, 1), **fields}
        self.rows.append(record)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
        print(json.dumps(record, default=str)[:400], flush=True)


def _helion_status() -> str:
    if importlib.util.find_spec("helion") is None:
        return "not installed (carry .whl-helion, see the docstring)"
    try:
        import helion  # noqa: F401
    except Exception as exc:
        return f"does not import: {type(exc).__name__}: {exc}"[:300]
    if importlib.util.find_spec("sklearn") is None:
        os.environ.setdefault("HELION_AUTOTUNER", "PatternSearch")
    return "ok"


def _problems(args: argparse.Namespace, helion: str, rec: Recorder) -> list[Path]:
    from kernelopt.contracts.problem import ProblemKind
    from kernelopt.kinds import detect_kind

    out = []
    for name in args.problems:
        path = (ROOT / name).resolve()
        if detect_kind(path.read_text()) == ProblemKind.HELION and helion != "ok":
            rec.row("setup", problem=path.stem, skipped=f"helion {helion}")
            continue
        out.append(path)
    return out


def section_baseline(paths: list[Path], device: str, rec: Recorder) -> dict[str, Any]:
    """Compile step per problem (cached for section 3); then the GPU-side rejections."""
    from kernelopt.campaigns import prepare_problem
    from kernelopt.compile.capture import compile_on
    from kernelopt.compile.timing import bench_ms
    from kernelopt.config import Settings
    from kernelopt.contracts import CompileInput
    from kernelopt.errors import ProblemError
    from kernelopt.store import open_store

    store = open_store(Settings.from_env().artifacts_dir)
    bench = bench_ms if device == "cuda" else (lambda fn: (fn(), 0.0)[1])
    compiled = {}
    for path in paths:
        t0 = time.monotonic()
        try:
            spec = prepare_problem(path, store)
            result = compile_on(CompileInput(problem=spec), store, device, bench)
        except Exception as exc:
            rec.row("baseline", problem=path.stem, error=f"{type(exc).__name__}: {exc}"[:600])
            continue
        compiled[path.stem] = (result, store)
        rec.row(
            "baseline",
            problem=path.stem,
            kind=result.problem.kind.value,
            mode=result.mode,
            reason=result.mode_reason,
            eager_ms=result.eager_ms,
            baseline_ms=result.compiled_ms,
            wrapper_ms=result.wrapper_ms,
            wrapper_matches=result.wrapper_matches_compiled,
            choose_s=round(result.compile_seconds, 1),
            wall_s=round(time.monotonic() - t0, 1),
            gpu=result.gpu_name,
        )
    for name, expected in BAD_PROBLEMS.items():
        if name == "huge_inputs" and device != "cuda":
            continue  # the memory check compares with free GPU memory: GPU only
        path = ROOT / "tests" / "kinds" / "problems" / f"{name}.py"
        try:
            spec = prepare_problem(path, store)
            compile_on(CompileInput(problem=spec, use_cache=False), store, device, bench)
            rec.row("rejection", problem=name, rejected=False, expected=expected)
        except ProblemError as exc:
            rec.row(
                "rejection",
                problem=name,
                rejected=expected in exc.reason,
                reason=exc.reason[:400],
            )
        except Exception as exc:
            rec.row("rejection", problem=name, rejected=False, error=repr(exc)[:400])
    return compiled


def section_verify(
    compiled: dict[str, Any], device: str, variants: int, rec: Recorder, fast: bool
) -> None:
    """Built-in variants through all four gates, one reference bundle per problem."""
    from gates.cascade import check_candidate, time_candidate
    from gates.reference import prepare_reference
    from gates.runner import fast_launch
    from kernelopt.compile.segment import segment
    from kernelopt.contracts import BuiltinProposeInput, SegmentInput
    from kernelopt.contracts.verdicts import GateSettings
    from kernelopt.kinds.builtin import propose

    settings = GateSettings(device=device, run_perf=device == "cuda", min_rounds=2, max_rounds=3)
    with fast_launch(device) if fast else contextlib.nullcontext() as launch:
        rec.row("verify", launcher=str(getattr(launch, "note", "spawn")))
        for name, (result, store) in compiled.items():
            if rec.left() < 60:
                rec.row("verify", problem=name, skipped="deadline")
                continue
            work = Path(tempfile.mkdtemp(prefix=f"kinds-verify-{name}-"))
            problem_path = store.materialize(result.problem.source, work, f"{name}.py")
            seg = segment(SegmentInput(compiled=result), store)
            target = seg.targets[0]
            proposal = propose(
                BuiltinProposeInput(
                    compiled=result,
                    segment=seg,
                    target=target,
                    state_source=target.source,
                    count=variants,
                ),
                store,
            )
            bundle = prepare_reference(problem_path, settings, work / "reference")
            if not bundle.ok:
                rec.row("verify", problem=name, error=bundle.outcome.describe())
                continue
            for variant in proposal.variants:
                if rec.left() < 45:
                    rec.row("verify", problem=name, variant=variant.label, skipped="deadline")
                    continue
                cand = work / f"variant_{len(list(work.glob('variant_*')))}.py"
                cand.write_text(store.get_text(variant.source))
                checked = check_candidate(bundle, cand, settings, work)
                if (
                    settings.run_perf
                    and checked.verdicts
                    and all(v.passed for v in checked.verdicts)
                ):
                    checked = time_candidate(checked, bundle, settings, work)
                rec.row(
                    "verify",
                    problem=name,
                    variant=variant.label,
                    gates=[f"{v.gate.value}:{v.status.value}" for v in checked.verdicts],
                    accepted=checked.accepted,
                    category=checked.category.value if checked.category else None,
                    baseline_ms=checked.baseline_ms,
                    candidate_ms=checked.candidate_ms,
                    speedup=checked.speedup,
                    reason=checked.reason[:300],
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="+", default=DEFAULT_PROBLEMS)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--deadline", type=float, default=540.0)
    parser.add_argument("--variants", type=int, default=2, help="built-in variants per problem")
    parser.add_argument("--sections", default="baseline,verify")
    parser.add_argument("--no-zygote", action="store_true")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", tempfile.mkdtemp(prefix="gpu-kinds-out-")))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELOPT_HOME", str(Path(tempfile.gettempdir()) / "kernelopt-home"))
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["KERNELOPT_GATES_SMALL"] = "1"
    rec = Recorder(out, time.monotonic(), args.deadline)
    sections = set(args.sections.split(","))
    helion = _helion_status()
    import torch
    import triton

    rec.row(
        "setup",
        torch=torch.__version__,
        triton=triton.__version__,
        cuda=torch.cuda.is_available(),
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        helion=helion,
        helion_autotuner=os.environ.get("HELION_AUTOTUNER", "default"),
    )
    paths = _problems(args, helion, rec)
    try:
        compiled = section_baseline(paths, args.device, rec) if "baseline" in sections else {}
        if "verify" in sections and compiled:
            section_verify(compiled, args.device, args.variants, rec, not args.no_zygote)
    except Exception:
        rec.row("crash", traceback=traceback.format_exc()[-3000:])
        return 1
    finally:
        print(f"\nrows in {rec.path}; wall {time.monotonic() - rec.started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
