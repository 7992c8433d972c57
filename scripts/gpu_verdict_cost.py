"""GPU-seconds and wall time of four-gate verdicts, per verdict and per stage (issue 22).

    mkdir -p .device/old && git archive 9ad0629 | tar -x -C .device/old   # here, carried
    source scripts/device_env.sh; source scripts/device_bwrap.sh
    python3 -m scripts.gpu_verdict_cost --repeat 3 --deadline 200 --before .device/old \
        --case swish_bias:swish_fused --case softmax:softmax_rows --case swish_bias:@identity
    # -> $OUT/verdict_cost.md (the table), verdict_cost.json (every verdict)

For each case (a problem of ``tests/problems/gates`` and a candidate of
``tests/fixtures/candidates/gates``) it runs ``--repeat``
whole verdicts (reference, gates 1-3, gate 4) in this one warm process: jobs fork
from a zygote started once (``gates.runner.fast_launch``), as in a GPU worker.
Per verdict it keeps the cascade's own device-seconds (``CascadeResult.gpu_seconds``),
the wall time of each stage, the number of gate processes started and the seconds
per child phase (read from each child's ``progress.jsonl``, so an old checkout is
measured the same way).  Each case first gets ``--warmup`` unrecorded verdicts
(compiler caches; with ``--before``, once for both checkouts, before the
deadline's clock starts), and no recorded verdict starts after ``--deadline``.  With ``--before DIR`` (``git archive 9ad0629`` extracted
there) the same cases run first from that code, in a subprocess of this call, so
before and after come from one device session: the subprocess runs this file by path
with that checkout first on ``PYTHONPATH`` (nothing edits ``sys.path``), and refuses
to measure if ``gates`` still imports from elsewhere.  ``--device cpu`` runs it under the
Triton interpreter with the CPU suite's settings (small sizes, eager baseline, no
speed claim): it counts processes and fixed costs, not GPU-seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = (
    "swish_bias:swish_fused",  # honest, clear win (4.3x on the H200)
    "softmax:softmax_rows",  # honest, close to 1x: the hard case for timing
    "diag_matmul:diag_rowscale",  # honest, 70x
    "swish_bias:partial_write",  # rejected at gate 2: no timing
)
GPU_CASES = ("swish_bias:@identity",)  # the baseline against itself: must read ~1.00x
IDENTITY = """\"\"\"The problem's own forward, compiled like the baseline: gate 4 must call it 1.00x.\"\"\"

import importlib.util

import torch

_spec = importlib.util.spec_from_file_location("_problem", {problem!r})
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)


class ModelNew(_mod.Model):
    def __init__(self, *args):
        super().__init__(*args)
        self._compiled = torch.compile(super().forward, mode={mode!r})

    def forward(self, *inputs):
        return self._compiled(*inputs)
"""
STAGES = ("reference", "gates_1_3", "gate_4", "total")


def _settings(args: argparse.Namespace):
    from kernelopt.contracts.verdicts import GateSettings

    rounds = {
        k: v
        for k, v in (("min_rounds", args.min_rounds), ("max_rounds", args.max_rounds))
        if v is not None
    }
    if args.device == "cpu":  # tests/gates/test_adversarial_cpu.py's settings
        cpu = {"min_rounds": 1, "max_rounds": 1, **rounds}
        return GateSettings(
            device="cpu",
            baseline_mode="eager",
            warmup_ms=2.0,
            rep_ms=10.0,
            static_timeout_s=120.0,
            timing_timeout_s=120.0,
            **cpu,
        )
    return GateSettings(device=args.device, **rounds)


def _child_phases(workdir: Path) -> tuple[int, dict[str, float]]:
    """Gate processes under ``workdir`` and the seconds of each ``kind.phase`` they marked."""
    count, seconds = 0, {}
    for progress in workdir.rglob("progress.jsonl"):
        marks = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
        if not marks:
            continue
        count += 1
        kind = next((str(m.get("job")) for m in marks if m.get("job")), "probe")
        for this, nxt in itertools.pairwise(marks):
            key = f"{kind}.{this.get('phase')}"
            seconds[key] = seconds.get(key, 0.0) + float(nxt["t"]) - float(this["t"])
    return count, {k: round(v, 3) for k, v in sorted(seconds.items())}


def one_verdict(
    problem: Path, candidate: Path, settings, workdir: Path, bundle=None
) -> dict[str, Any]:
    """One whole verdict through the cascade's public steps, each step's wall time kept.

    With ``bundle`` (a reference shared by several verdicts, as batch ``verify``
    shares one) the reference's cost is left out of the row.
    """
    from gates.cascade import check_candidate, time_candidate, too_slow_for_cpu_timing
    from gates.reference import prepare_reference

    t0 = time.monotonic()
    shared = bundle is not None
    if bundle is None:
        bundle = prepare_reference(problem, settings, workdir / "reference")
    t1 = time.monotonic()
    result = check_candidate(bundle, candidate, settings, workdir)
    t2 = time.monotonic()
    timed = False
    passed = bool(result.verdicts) and all(v.passed for v in result.verdicts)
    if passed and not too_slow_for_cpu_timing(result, settings):
        result = time_candidate(result, bundle, settings, workdir)
        timed = True
    t3 = time.monotonic()
    processes, phases = _child_phases(workdir)
    stages = result.environment.get("stage_seconds") or {}
    return {
        "accepted": result.accepted,
        "deciding_gate": result.deciding_gate.value if result.deciding_gate else None,
        "category": result.category.value if result.category else None,
        "speedup": result.speedup,
        "timed": timed,
        "gpu_seconds": round(result.gpu_seconds - (bundle.gpu_seconds if shared else 0.0), 3),
        "wall": {
            "reference": round(t1 - t0, 3),
            "gates_1_3": round(t2 - t1, 3),
            "gate_4": round(t3 - t2, 3),
            "total": round(t3 - t0, 3),
        },
        "processes": processes,
        "child_phases": phases,
        "cascade_stages": stages,
    }


def _candidate_file(cand: str, problem: Path, settings, scratch: Path) -> Path:
    if cand != "@identity":
        return ROOT / "tests" / "fixtures" / "candidates" / "gates" / f"{cand}.py"
    path = scratch / f"identity_{problem.stem}.py"
    mode = None if settings.baseline_mode in ("eager", "default") else settings.baseline_mode
    path.write_text(IDENTITY.format(problem=str(problem), mode=mode))
    return path


def run_cases(args: argparse.Namespace, sink: Path | None = None) -> list[dict[str, Any]]:
    """``--warmup`` unrecorded rounds, then ``--repeat`` recorded ones, each over every case
    (so a deadline cuts repeats, not cases); none starts after ``--deadline``.  ``sink``
    gets the rows after every verdict, so a killed run still leaves what it measured."""
    from gates.reference import prepare_reference
    from gates.runner import fast_launch

    started = time.monotonic()
    settings = _settings(args)
    problems = ROOT / "tests" / "problems" / "gates"
    rows: list[dict[str, Any]] = []
    cases = args.case or [*DEFAULT_CASES, *(GPU_CASES if args.device != "cpu" else ())]
    label = args.label + (" (shared reference)" if args.shared_reference else "")
    with fast_launch(args.device) as launch, tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        sys.stderr.write(f"[{args.label}] launch: {launch.note}\n")
        work = []
        for case in cases:
            prob, cand = case.split(":")
            problem = problems / f"{prob}.py"
            shared = None
            if args.shared_reference:
                shared = prepare_reference(problem, settings, scratch / f"ref-{prob}-{cand}")
            work.append((case, problem, _candidate_file(cand, problem, settings, scratch), shared))
        for i in range(-args.warmup, args.repeat):
            for case, problem, candidate, shared in work:
                if args.deadline and time.monotonic() - started > args.deadline:
                    sys.stderr.write(f"[{args.label}] deadline: {case} run{i} not started\n")
                    return rows
                with tempfile.TemporaryDirectory(prefix="verdict-cost-") as verdict_dir:
                    row = one_verdict(problem, candidate, settings, Path(verdict_dir), shared)
                row.update(label=label, case=case, run=i)
                sys.stderr.write(
                    f"[{args.label}] {case:28} run{i} gpu_s={row['gpu_seconds']:6.2f} "
                    f"wall={row['wall']['total']:6.2f} procs={row['processes']} "
                    f"{row['deciding_gate'] or row['category']} {row['speedup'] or ''}\n"
                )
                if i >= 0:  # warm-up verdicts fill the compiler caches: not recorded
                    rows.append(row)
                    if sink is not None:
                        sink.write_text(json.dumps(rows, indent=1))
    return rows


def _stat(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):6.2f} / {max(values):6.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    """Median / max per label and case: device-seconds, wall per stage, processes."""
    head = f"| label | case | n | GPU-s | {' | '.join(f'{s} s' for s in STAGES)} | processes |"
    lines = [
        "median / max per verdict",
        "",
        head,
        "|" + " --- |" * (head.count("|") - 1),
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["label"], row["case"]), []).append(row)
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        for (lab, case), group in [*list(groups.items()), ((label, "ALL"), mine)]:
            if lab != label:
                continue
            walls = " | ".join(_stat([r["wall"][s] for r in group]) for s in STAGES)
            procs = _stat([float(r["processes"]) for r in group])
            gpu = _stat([r["gpu_seconds"] for r in group])
            lines.append(f"| {label} | {case} | {len(group)} | {gpu} | {walls} | {procs} |")
    lines += ["", "child phases (median seconds per verdict, summed over its processes)", ""]
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        keys = sorted({k for r in mine for k in r["child_phases"]})
        parts = [
            f"{k}={statistics.median([r['child_phases'].get(k, 0.0) for r in mine]):.2f}"
            for k in keys
        ]
        lines.append(f"{label}: " + " ".join(parts))
    lines += [
        "",
        "stage_seconds of the timed verdicts (median; *.outside = fork, CUDA init, exit)",
        "",
    ]
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label and "timing_children" in r["cascade_stages"]]
        keys = sorted({k for r in mine for k in r["cascade_stages"]})
        parts = [
            f"{k}={statistics.median([r['cascade_stages'].get(k, 0.0) for r in mine]):.2f}"
            for k in keys
        ]
        lines.append(f"{label}: " + (" ".join(parts) or "(not reported by this checkout)"))
    return "\n".join(lines)


def _check_imports_from(code: Path, parser: argparse.ArgumentParser) -> None:
    """The ``--before`` child measures the old checkout only if its imports resolve there."""
    import gates

    where = Path(gates.__file__).resolve()
    if not where.is_relative_to(code.resolve()):
        parser.error(f"gates is imported from {where}, not from {code}: put it first on PYTHONPATH")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--case", action="append", default=[], help="PROBLEM:CANDIDATE")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, help="an old checkout to measure first")
    parser.add_argument("--label", default="after")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first")
    parser.add_argument(
        "--deadline", type=float, default=0.0, help="seconds; --before gets half of them"
    )
    parser.add_argument("--min-rounds", type=int, help="gate 4 rounds (default: the settings')")
    parser.add_argument("--max-rounds", type=int)
    parser.add_argument(
        "--shared-reference",
        action="store_true",
        help="one reference per case for all its verdicts (as batch verify); rows leave it out",
    )
    parser.add_argument("--json", type=Path, help="write rows here (default $OUT)")
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # run another checkout
    parser.add_argument("--table", type=Path, nargs="+", help="only print the table of these")
    args = parser.parse_args()
    if args.table:  # e.g. the JSON files of a device run that was cut short
        sys.stdout.write(table([r for f in args.table for r in json.loads(f.read_text())]) + "\n")
        return 0
    if args.code is not None:
        _check_imports_from(args.code, parser)
    if args.device == "cpu":
        os.environ.setdefault("KERNELOPT_GATES_SMALL", "1")
    out = Path(os.environ.get("OUT") or ROOT / ".verdict_cost")
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if args.before is not None and args.warmup:
        # one warm-up for both checkouts (the compiler caches they share), outside the deadline
        run_cases(
            argparse.Namespace(**{**vars(args), "repeat": 0, "label": "warm-up", "deadline": 0})
        )
        args.warmup = 0
    started = time.monotonic()
    if args.before is not None:
        before_json = out / "verdict_cost_before.json"
        cmd = [sys.executable, __file__, "--device", args.device, "--repeat", str(args.repeat)]
        cmd += [f"--case={c}" for c in args.case]
        cmd += ["--shared-reference"] if args.shared_reference else []
        cmd += ["--warmup", str(args.warmup), "--deadline", str(args.deadline / 2)]
        for flag, value in (("--min-rounds", args.min_rounds), ("--max-rounds", args.max_rounds)):
            cmd += [flag, str(value)] if value is not None else []
        cmd += ["--label", "before", "--code", str(args.before), "--json", str(before_json)]
        # this file by path, its imports from the old checkout (PYTHONPATH, not this root):
        # other entries (the device's wheels) stay
        paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        keep = [x for x in paths if x and Path(x).resolve() != ROOT]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(args.before.resolve()), *keep])}
        subprocess.run(cmd, check=True, env=env, cwd=args.before)
        rows += json.loads(before_json.read_text())
    if args.deadline:  # what the old checkout left of the budget
        args.deadline = max(1.0, args.deadline - (time.monotonic() - started))
    after = run_cases(args, args.json or out / f"verdict_cost_{args.label}.json")
    if args.code is not None:
        return 0
    rows += after
    text = table(rows)
    (out / "verdict_cost.md").write_text(text + "\n")
    (out / "verdict_cost.json").write_text(json.dumps(rows, indent=1))
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
