"""Wall time per ``gate_candidate`` verdict in the campaign path, with and without shared references.

    # here (CPU, Triton interpreter, small sizes): before = main's code, after = this one;
    # "before" runs this file by path, so its imports come from PYTHONPATH, not this root
    PYTHONPATH=/path/to/main python3 scripts/campaign_verdict_cost.py --device cpu --label before
    python3 -m scripts.campaign_verdict_cost --device cpu --label after
    python3 -m scripts.campaign_verdict_cost --device cpu --label after-unshared --uses 1
    # the H200 (forward timing included; the problem is compiled once first)
    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m scripts.campaign_verdict_cost --device cuda --count 9 --label after
    # -> $OUT/campaign_cost_<label>.json; --table FILE... prints the table of several runs

It runs ``--count`` candidates of one problem (``--case PROBLEM:CAND,CAND,...``
from ``tests/gates``, taken in turn; PROBLEM may be a file path such as
``problems/level1/001_relu_chain.py``, and the candidate ``@model`` is the
problem's own ``Model`` as ``ModelNew``, which passes gates 1-3) through ``gates.campaign.gate_candidate``
in this one warm process (gate jobs fork from one zygote, as in a GPU worker),
with a directory of kept reference bundles as a GPU worker has one.  Code
that predates ``gates.reference_cache`` ignores that directory, so the same
command measures main.  Per verdict: wall time, whether the reference child
ran, and the verdict's ``stage_seconds`` (``reference_draw_child``: the child that
made a kept bundle's draw for this use).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.gate_levers import add_lever_arguments, levers_from

ROOT = Path(__file__).resolve().parents[1]
CACHE_ENV = "KERNELOPT_REFERENCE_CACHE"  # gates.reference_cache.REFERENCE_CACHE_ENV


def _compiled(store: Any, problem: Path, device: str) -> Any:
    """The problem compiled for real on a GPU (timing needs the wrapper), in name only here."""
    from kernelopt.contracts import CompileInput, ProblemSpec
    from tests.support.compiled import stub_compiled

    spec = ProblemSpec(name=problem.stem, source=store.put_text(problem.read_text()))
    if device != "cpu":
        from kernelopt.kinds.registry import compile_problem

        return compile_problem(CompileInput(problem=spec), store)
    blob = store.put_text("unused in forward mode", name="placeholder")
    return stub_compiled(spec, blob, cache_key="cost", torch_version="-", triton_version="-")


def _input(store: Any, compiled: Any, candidate: str, args: argparse.Namespace) -> Any:
    from kernelopt.contracts import CandidateGateInput, SearchMode, SearchTarget, SegmentResult
    from kernelopt.contracts.compiled import TargetKind
    from kernelopt.contracts.verdicts import GateSettings

    target = SearchTarget(id="forward", kind=TargetKind.FORWARD)
    segment = SegmentResult(
        kernels=[], library_calls=[], mode=SearchMode.SINGLE, mode_reason="cost", targets=[target]
    )
    name, text = _candidate_text(candidate, compiled, store)
    extra: dict[str, Any] = {"reference_uses": args.uses} if args.uses is not None else {}
    if args.cpu_budget is not None:
        extra["cpu_budget_s"] = args.cpu_budget
    extra.update(levers_from(args))
    return CandidateGateInput(
        compiled=compiled,
        segment=segment,
        target=target,
        candidate_id=candidate,
        source=store.put_text(text, name=name),
        measure_kernel_speedup=args.device != "cpu",
        model_gate=True,
        timeout_s=300,
        settings=GateSettings(device=args.device, **extra),
    )


def _problem_path(name: str) -> Path:
    """A test problem by name, or a problem file by path (relative to the repository)."""
    if name.endswith(".py"):
        return (ROOT / name).resolve()
    return ROOT / "tests" / "problems" / "gates" / f"{name}.py"


def _candidate_text(candidate: str, compiled: Any, store: Any) -> tuple[str, str]:
    """A fixture candidate's file name and source, or ``@model``: the problem's own Model
    as ModelNew."""
    if candidate == "@model":
        return "model.py", store.get_text(compiled.problem.source) + "\n\nModelNew = Model\n"
    path = ROOT / "tests" / "fixtures" / "candidates" / "gates" / f"{candidate}.py"
    return path.name, path.read_text()


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from gates.campaign import gate_candidate
    from gates.runner import fast_launch
    from kernelopt.store import open_store

    problem_name, _, names = args.case.partition(":")
    candidates = names.split(",")
    problem = _problem_path(problem_name)
    rows: list[dict[str, Any]] = []
    with fast_launch(args.device) as launch, tempfile.TemporaryDirectory() as tmp:
        sys.stderr.write(f"[{args.label}] launch: {launch.note}\n")
        os.environ[CACHE_ENV] = str(Path(tmp) / "references")
        store = open_store(Path(tmp) / "artifacts")
        compiled = _compiled(store, problem, args.device)
        for i in range(-args.warmup, args.count):
            candidate = candidates[i % len(candidates)]
            started = time.monotonic()
            result = gate_candidate(_input(store, compiled, candidate, args), store)
            wall = time.monotonic() - started
            stages = result.stage_seconds
            mark = next((v.metrics.get("reference") for v in result.verdicts), None) or {}
            row = {
                "label": args.label,
                "case": args.case,
                "run": i,
                "candidate": candidate,
                "passed": result.passed,
                "wall": round(wall, 3),
                "reference_child_ran": "reference_child" in stages,
                "reference": mark,
                "levers": levers_from(args),
                "stage_seconds": stages,
            }
            sys.stderr.write(
                f"[{args.label}] run{i} {candidate:14} wall={wall:6.2f}s "
                f"ref_child={'yes' if row['reference_child_ran'] else 'no '} "
                f"bundle={mark.get('id', '-')} use={mark.get('use', '-')}\n"
            )
            if i >= 0:
                rows.append(row)
            elif i == -1:  # the warm-up fills compiler caches; its bundle is not kept
                shutil.rmtree(Path(tmp) / "references", ignore_errors=True)
    return rows


STAGES = ("reference", "reference_child", "reference_draw_child", "gates_1_2", "gates_1_3")
STAGES += ("timing", "baseline.settle", "candidate.settle", "baseline.wait_go")
CAPTION = (
    "Stage columns: the median over the verdicts that ran the stage, and how many did "
    "(a failing verdict never reaches timing); - where none did."
)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "-"


def stage_median(rows: list[dict[str, Any]], stage: str) -> str:
    """One stage's median over the verdicts that ran it, and their count.

    A verdict that failed gates 1-3 has no timing stages; counting it as 0 s made the
    median of a label with more failing than passing verdicts read 0.000.
    """
    values = [r["stage_seconds"][stage] for r in rows if stage in r["stage_seconds"]]
    return f"{_median(values)} ({len(values)})" if values else "-"


def table(rows: list[dict[str, Any]]) -> str:
    """Per label: verdicts, reference children, median and total wall, median stages."""
    head = "| label | levers | verdicts | reference children | wall median s | wall total s | "
    head += "passing wall median s | " + " | ".join(f"{s} s (n)" for s in STAGES) + " |"
    lines = [CAPTION, "", head, "|" + " --- |" * (head.count("|") - 1)]
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        ran = sum(r["reference_child_ran"] for r in mine)
        walls = [r["wall"] for r in mine]
        passing = _median([r["wall"] for r in mine if r["passed"]])
        levers = ", ".join(f"{k}={v}" for k, v in (mine[0].get("levers") or {}).items()) or "-"
        parts = " | ".join(stage_median(mine, s) for s in STAGES)
        lines.append(
            f"| {label} | {levers} | {len(mine)} | {ran} | {_median(walls)} | {sum(walls):.2f} | "
            f"{passing} | {parts} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--case", default="swish_bias:swish_fused,partial_write,mutate_input")
    parser.add_argument("--count", type=int, default=6, help="recorded verdicts")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded verdicts first")
    parser.add_argument("--uses", type=int, help="GateSettings.reference_uses (default: its own)")
    parser.add_argument("--cpu-budget", type=float, help="GateSettings.cpu_budget_s (0: full size)")
    add_lever_arguments(parser)
    parser.add_argument("--label", default="after")
    parser.add_argument("--table", type=Path, nargs="+", help="only print the table of these")
    args = parser.parse_args()
    if args.table:
        sys.stdout.write(table([r for f in args.table for r in json.loads(f.read_text())]) + "\n")
        return 0
    if args.device == "cpu":
        os.environ.setdefault("KERNELOPT_GATES_SMALL", "1")
    rows = run(args)
    out = Path(os.environ.get("OUT") or ROOT / ".campaign_cost")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"campaign_cost_{args.label}.json").write_text(json.dumps(rows, indent=1))
    sys.stdout.write(table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
