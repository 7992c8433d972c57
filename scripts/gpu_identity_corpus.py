"""GPU run for issue 30: the identity corpus on the H200, then ``optimize`` on it.

Not part of CI (campaigns need the GPU worker).  Two sections, one per device call:

1. **verify** (about 3-5 min): every problem in ``tests/problems/identity``
   (the near-memory-limit one included) gets the identity candidate
   (``ModelNew = Model``) through the full four-gate cascade on ``cuda``, one
   reference bundle each, children forked from the zygote.  Every row must be
   accepted against the eager baseline (the candidate *is* the eager model, so gate 4
   must not find it slower, nor quarantine its timing).  Rows go to
   ``$OUT/identity.jsonl`` as they finish, a ``{"skipped": "deadline"}`` row for each
   problem the deadline left out; the exit is non-zero unless every problem asked for
   ran and was accepted::

       source scripts/device_env.sh; python3 -m scripts.gpu_identity_corpus verify --deadline 540

   ``--ab`` with levers (``--settle-wall 50 --prestart-timing --ab``) runs each problem
   with them and without, back to back, for a side-by-side of the same host minutes.
   Turn sessions decide where the host clock would (``GateSettings.host_clock_turns``,
   on by default; ``--host-clock-turns 0``: paired rounds only), ``--turns 12`` everywhere.

2. **optimize**: ``kernelopt optimize`` machinery with the built-in proposer
   on the same problems, through ``scripts/gpu_e2e.py`` (server, workers,
   outcomes and histories under ``$OUT``).  A small built-in campaign takes
   ~2-3 min of the one GPU worker (two slots by default, ``--gpu-slots``), so the
   corpus needs several calls:
   ``--chunk K/N`` picks every N-th problem from K (``--only a,b`` names them, ``--owed N``
   takes the first N without a campaign outcome under docs/results), and ``--resume``
   continues a chunk in the next call on the warm machine (as gpu_e2e documents)::

       source scripts/device_env.sh; python3 -m scripts.gpu_identity_corpus optimize --chunk 0/8

   Then ``python3 -m scripts.gpu_identity_corpus summary $OUT`` checks that
   every campaign reached an outcome (optimized, matched or fallback), never a
   crash nor unfinished, and prints the table (and the verify count of an
   ``identity.jsonl`` there).  carry [".device"] for this section.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.gate_levers import add_lever_arguments, levers_from

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "problems" / "identity").glob("*.py"))


def verify(
    deadline: float,
    out: Path,
    only: list[str] | None = None,
    levers: dict[str, Any] | None = None,
    ab: bool = False,
) -> int:
    """Section 1: four gates on the identity candidate of every corpus problem.

    Every problem asked for gets a row in ``identity.jsonl``, the ones the deadline left
    out too, and the exit is non-zero unless every one ran and was accepted.  ``levers``:
    GateSettings fields to turn on (issue 22's verdict levers), named in every row, so the
    corpus is also their check that identical code still reads identical.  ``ab``: each
    problem twice, with the levers and without, back to back and in alternating order, so
    the host's drift over the call falls on both alike.
    """
    from gates.runner import fast_launch

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, fast_launch("cuda"):
        for path, chosen_levers in runs(chosen(only), levers or {}, ab=ab):
            if time.monotonic() - started > deadline:
                row: dict[str, Any] = {
                    "problem": path.stem,
                    "skipped": "deadline",
                    "levers": chosen_levers,
                }
            else:
                row = _verify_one(path, Path(tmp), chosen_levers)
                print(
                    f"{path.stem:32} {'ok' if row['accepted'] else 'REJECTED'} {row['seconds']} s"
                    f"{' (levers)' if chosen_levers else ''}"
                )
            rows.append(row)
            with (out / "identity.jsonl").open("a") as handle:
                handle.write(json.dumps(row) + "\n")
    print(verify_line(rows))
    return 0 if all_accepted(rows) else 1


def runs(
    paths: list[Path], levers: dict[str, Any], *, ab: bool
) -> list[tuple[Path, dict[str, Any]]]:
    """Each verdict to run: a problem with the levers; with ``ab`` also without them, the
    levers first for every other problem."""
    if not ab:
        return [(path, levers) for path in paths]
    out: list[tuple[Path, dict[str, Any]]] = []
    for i, path in enumerate(paths):
        pair = [levers, {}] if i % 2 == 0 else [{}, levers]
        out += [(path, chosen) for chosen in pair]
    return out


def chosen(only: list[str] | None) -> list[Path]:
    """The corpus problems asked for, in the order asked (a deadline cuts the last ones);
    all of them, in the corpus's order, without ``only``."""
    if not only:
        return list(CORPUS)
    by_name = {path.stem: path for path in CORPUS}
    return [by_name[name] for name in dict.fromkeys(only)]


def _verify_one(path: Path, tmp: Path, levers: dict[str, Any]) -> dict[str, Any]:
    """The identity candidate of one problem through the four gates, as its jsonl row."""
    from gates.cascade import verify_candidate
    from kernelopt.contracts.verdicts import GateSettings

    # The identity candidate is the eager model: against an eager baseline gate 4 must say
    # "matched" (against Inductor's it could honestly be slower, which proves nothing here).
    settings = GateSettings(device="cuda", baseline_mode="eager", **levers)
    candidate = tmp / f"{path.stem}_identity.py"
    candidate.write_text(path.read_text() + "\n\nModelNew = Model\n")
    t0 = time.monotonic()
    result = verify_candidate(path, candidate, settings, workdir=tmp / path.stem)
    return {
        "problem": path.stem,
        "accepted": result.accepted,
        "category": result.category.value if result.category else None,
        "speedup": result.speedup,
        "reason": result.reason[:300],
        "evaluation": result.environment.get("evaluation", ""),
        "seconds": round(time.monotonic() - t0, 1),
        # where the verdict's device time went, gate by gate (issue 22's budget)
        "gpu_seconds": {v.gate.value: round(v.gpu_seconds, 2) for v in result.verdicts},
        "stage_seconds": result.environment.get("stage_seconds", {}),  # children's phases, summed
        "timing": _timing_rounds(result),
        "levers": levers,
    }


def verify_line(rows: list[dict[str, Any]]) -> str:
    """The verify run in one line: accepted of those that ran, and those never reached.

    A problem the deadline left out is neither accepted nor rejected, so it is counted
    apart (a run of 3 rejections out of 10 asked must not read "7 of 10 accepted").
    """
    ran = [row for row in rows if "skipped" not in row]
    accepted = sum(bool(row.get("accepted")) for row in ran)
    return f"{accepted} of {len(ran)} run accepted; {len(rows) - len(ran)} not reached (deadline)"


def all_accepted(rows: list[dict[str, Any]]) -> bool:
    """Every problem asked for ran and was accepted (a skipped row has no ``accepted``)."""
    return all(row.get("accepted") for row in rows)


def _timing_rounds(result: Any) -> dict[str, Any]:
    """Gate 4's rounds in short: each side's event and host ms per round, the CPUs they ran
    on, and the A/A order control, so a noisy or order-biased verdict can be read later."""
    perf = next((v for v in result.verdicts if v.gate.value == "performance"), None)
    if perf is None:
        return {}
    metrics = perf.metrics

    def side(name: str) -> list[dict[str, Any]]:
        return [
            {
                "event": r.get("event_ms"),
                "host": r.get("host_ms"),
                "host_batches": r.get("host_samples"),  # within a round, against across rounds
                "calls_per_batch": r.get("host_calls_per_batch"),
                "copies": r.get("host_copies_ms"),  # taken off each batch's raw time
                "raw": r.get("host_raw_ms"),
                "cpus": r.get("cpus"),
            }
            for r in metrics.get(name, {}).get("rounds", [])
        ]

    return {
        "baseline": side("baseline"),
        "candidate": side("candidate"),
        "order_control": metrics.get("order_control"),
        "other_work": metrics.get("other_work"),  # NVML while idle, after unstable rounds
        # turn sessions: calibration, whole windows, record phases, what came off, probes
        "turns": metrics.get("turns"),
        # host_clock_turns: the paired round set aside once it rested on the host clock
        "host_probe": metrics.get("host_probe"),
        "decision": metrics.get("decision"),
    }


def owed_problems(results: Path = ROOT / "docs" / "results") -> list[Path]:
    """The corpus problems without a campaign outcome among the committed results (an
    outcome file is named ``<problem>-<id>.outcome.json``; an unfinished one has none)."""
    done = {p.name.rsplit("-", 1)[0] for p in results.rglob("*.outcome.json")}
    return [p for p in CORPUS if p.stem not in done]


def unverified_problems(results: Path = ROOT / "docs" / "results") -> list[Path]:
    """The corpus problems no committed GPU ``identity.jsonl`` row has accepted yet (a
    row the deadline skipped, or one refused, leaves its problem owed)."""
    accepted = {
        row["problem"]
        for path in results.rglob("identity.jsonl")
        for row in identity_rows(path)
        if row.get("accepted")
    }
    return [p for p in CORPUS if p.stem not in accepted]


def optimize(
    problems: list[Path],
    deadline: float,
    resume: bool,
    plans: int,
    max_targets: int,
    gpu_slots: int,
) -> int:
    """Section 2: campaigns with the built-in proposer, through gpu_e2e.py.

    The point is that every problem reaches an outcome, so the search is the smallest
    one by default (one plan, one target), to fit the corpus into few device calls, and
    the GPU worker runs ``gpu_slots`` activities at once: its timed sections still take
    the GPU alone (gates/README.md, "The GPU's lease"), the compiles beside them do not.
    """
    cmd = [sys.executable, "-m", "scripts.gpu_e2e", "--deadline", str(deadline)]
    cmd += ["--plans", str(plans), "--max-targets", str(max_targets)]
    cmd += ["--resume"] if resume else []
    env = {**os.environ, "KERNELOPT_GPU_SLOTS": str(gpu_slots)}
    return subprocess.call([*cmd, *map(str, problems)], cwd=ROOT, env=env)


def summary(out: Path) -> int:
    """What ``out`` holds: the verify rows of ``identity.jsonl`` and the campaigns of
    gpu_e2e's ``table.json``; non-zero unless all of them passed."""
    found = [name for name in ("identity.jsonl", "table.json") if (out / name).is_file()]
    if not found:
        print(f"{out} holds neither identity.jsonl nor table.json")
        return 1
    code = 0
    if "identity.jsonl" in found:
        rows = identity_rows(out / "identity.jsonl")
        print(verify_line(rows))
        code |= not all_accepted(rows)
    if "table.json" in found:
        code |= campaign_summary(out / "table.json")
    return code


def identity_rows(path: Path) -> list[dict[str, Any]]:
    """``identity.jsonl``'s rows, the last one of each problem and levers (a later call may
    run one an earlier call's deadline skipped; an A/B run has two per problem)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return list({_row_key(row): row for row in rows}.values())


def _row_key(row: dict[str, Any]) -> tuple[str, str]:
    return row["problem"], json.dumps(row.get("levers", {}), sort_keys=True)


def campaign_summary(table: Path) -> int:
    """Every campaign in gpu_e2e's ``table.json`` ended with an outcome (never an error).

    Its rows are ``[campaign id, category | "unfinished" | "error", ...]``: an
    unfinished one ran out of the call's time (``--resume`` it), an error is a crash.
    Either one means that not every campaign reached an outcome yet: exit 1.
    """
    rows = json.loads(table.read_text())
    for row in rows:
        print("  ".join(str(x) for x in row))
    errors = [row[0] for row in rows if row[1] == "error"]
    unfinished = [row[0] for row in rows if row[1] == "unfinished"]
    print(
        f"{len(rows) - len(errors) - len(unfinished)} of {len(rows)} reached an outcome; "
        f"errors: {errors or 'none'}; unfinished (resume them): {unfinished or 'none'}"
    )
    return 1 if errors or unfinished else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="section", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--deadline", type=float, default=540.0)
    v.add_argument("--only", default="", help="comma-separated problem names (default: all)")
    v.add_argument("--owed", type=int, default=0, help="the first N no committed row has accepted")
    v.add_argument(
        "--owed-on",
        default="",
        help="with --owed: only rows under docs/results/<this> count (h200: owed on an H200)",
    )
    add_lever_arguments(v)
    v.add_argument("--ab", action="store_true", help="each problem with the levers and without")
    o = sub.add_parser("optimize")
    o.add_argument("--chunk", default="0/8", help="every N-th problem from K (K/N)")
    o.add_argument("--only", default="", help="comma-separated problem names (not --chunk)")
    o.add_argument(
        "--owed", type=int, default=0, help="the first N without a committed outcome (not --chunk)"
    )
    o.add_argument("--deadline", type=float, default=540.0)
    o.add_argument("--resume", action="store_true")
    o.add_argument("--plans", type=int, default=1)
    o.add_argument("--max-targets", type=int, default=1)
    o.add_argument("--gpu-slots", type=int, default=2, help="activities the GPU worker runs")
    s = sub.add_parser("summary")
    s.add_argument("out", type=Path)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/gpu-identity-out"))
    out.mkdir(parents=True, exist_ok=True)
    only = [n for n in getattr(args, "only", "").split(",") if n]
    unknown = sorted(set(only) - {path.stem for path in CORPUS})
    if unknown:
        parser.error(f"--only names problems the corpus does not hold: {unknown}")
    if args.section == "verify":
        levers = levers_from(args)
        if args.ab and not levers:
            parser.error("--ab compares the levers given against none: name at least one")
        if args.owed and not only:
            results = ROOT / "docs" / "results" / args.owed_on
            only = [p.stem for p in unverified_problems(results)[: args.owed]]
            if not only:
                print("every corpus problem has an accepted identity row")
                return 0
        return verify(args.deadline, out, only, levers, ab=args.ab)
    if args.section == "optimize":
        k, n = (int(x) for x in args.chunk.split("/"))
        problems = CORPUS[k::n]
        if only:
            problems = [p for p in CORPUS if p.stem in only]
        elif args.owed:
            problems = owed_problems()[: args.owed]
        return optimize(
            problems, args.deadline, args.resume, args.plans, args.max_targets, args.gpu_slots
        )
    return summary(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
