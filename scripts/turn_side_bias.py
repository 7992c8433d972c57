"""Where the identity's turn-session bias comes from: per side, what each turn is charged.

Runs ``--sessions`` real turn sessions (``gates.turns``) of a problem against a
candidate, by default the identity (``ModelNew = Model``), or with ``--aa`` the
trusted reference in both children, and prints per side, medians over all turns:
the whole window per call, the record phase, the probe wait charged to the turn
(the idle probe that follows it: the baseline child's, or with ``--probe-child``
a third trusted child's, ``GateSettings.turn_probe_child``), the rest (window minus record
minus probe: the calls and the switch into the turn), and the child's own ms per
call (its clock, from after its first sync: no switch in it).  A side that pays
the switches between processes shows it in the probe and in the rest but not in
its own ms per call.  With the probe child both sides' turns are entered from and
left to the same process: the A/B for the setting runs the same problem with and
without ``--probe-child`` (and with ``--aa``, where the bias should vanish either way).
The baseline is the eager model, as the identity corpus (scripts/gpu_identity_corpus.py)
times it: against an Inductor baseline (``--baseline max-autotune-no-cudagraphs``) the
identity is honestly slower or faster, and every session compiles the baseline again.

    python scripts/turn_side_bias.py tests/problems/identity/channels_last_input.py \
        --device cuda --sessions 6 --pairs 12 [--aa] [--probe-child]
"""

from __future__ import annotations

import argparse
import statistics as st
import tempfile
from pathlib import Path

from gates.cascade import baseline_source, round_setup
from gates.protocol import ModelSource, TimingResult
from gates.reference import prepare_reference
from gates.turns import run_turn_round
from kernelopt.contracts.verdicts import GateSettings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--aa", action="store_true", help="the reference in both children")
    ap.add_argument(
        "--baseline",
        default="eager",
        help="the baseline's mode: eager, as the identity corpus times it, or an Inductor mode",
    )
    ap.add_argument(
        "--probe-child",
        action="store_true",
        help="the idle probe in a third trusted child (GateSettings.turn_probe_child)",
    )
    args = ap.parse_args()
    args.problem = args.problem.resolve()
    settings = GateSettings(
        device=args.device,
        baseline_mode=args.baseline,
        turn_pairs=args.pairs,
        turn_probe_child=args.probe_child,
    )
    if args.device == "cpu":
        settings = settings.model_copy(update={"baseline_mode": "eager", "timing_timeout_s": 120.0})
    root = Path(tempfile.mkdtemp(prefix="turn-bias-"))
    setup = round_setup(prepare_reference(args.problem, settings, root / "ref"), settings)
    base = baseline_source(str(args.problem), settings)
    if args.aa:
        cand = base
    else:
        path = root / "candidate.py"
        path.write_text(args.problem.read_text() + "\nModelNew = Model\n")
        cand = ModelSource(
            kind="candidate", problem_path=str(args.problem), candidate_path=str(path)
        )
    rows: dict[str, dict[str, list[float]]] = {
        s: {"window": [], "record": [], "probe": [], "rest": [], "own": []}
        for s in ("baseline", "candidate")
    }
    medians = []
    for i in range(args.sessions):
        r = run_turn_round(
            setup.turn_job(base, "baseline"),
            setup.turn_job(cand, "candidate"),
            root / f"s{i}",
            pairs=args.pairs,
            timeout_s=settings.timing_timeout_s,
            device=args.device,
            record_credit=settings.turn_record_credit,
            probe_child=settings.turn_probe_child,
        )
        if r.failure is not None:
            raise SystemExit(f"session {i}: {r.failure[0]} {r.failure[1].describe()}")
        medians.append(st.median(r.ratios))
        for k, (side, window) in enumerate(r.windows_ms):
            probe = r.probe_waits_ms[k + 1]  # the probe after turn k, charged to it
            got = rows[side]
            got["window"].append(window / r.calls * 1e3)
            got["record"].append(r.records_ms[k] / r.calls * 1e3)
            got["probe"].append(probe / r.calls * 1e3)
            got["rest"].append((window - r.records_ms[k] - probe) / r.calls * 1e3)
        for side in ("baseline", "candidate"):
            res = TimingResult.model_validate(r.outcomes[side].result)
            rows[side]["own"] += [ms * 1e3 for ms in res.turn_ms]
        print(f"session {i}: calls/turn {r.calls}, median pair ratio {medians[-1]:.4f}", flush=True)
        # after every session: a run cut by its caller's time limit keeps its answer so far
        _table(rows, medians, settings.turn_probe_child)


def _table(
    rows: dict[str, dict[str, list[float]]], medians: list[float], probe_child: bool
) -> None:
    """The per-side medians over the sessions so far, and the median of their medians."""
    print("us per call (medians)   window   record    probe     rest  own(child)")
    for side, got in rows.items():
        print(f"{side:>10}", *(f"{st.median(v):8.3f}" for v in got.values()))
    prober = "a probe child" if probe_child else "the baseline child"
    print(
        f"median of {len(medians)} session medians {st.median(medians):.4f} (probes: {prober})",
        flush=True,
    )


if __name__ == "__main__":
    main()
