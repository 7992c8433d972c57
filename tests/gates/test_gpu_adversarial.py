"""The adversarial set on the GPU (H200 host): every cheat class rejected or honestly timed.

Runs the whole suite once (references and gates 1-3 in parallel, gate 4 one
candidate at a time, full problem sizes) and checks each case.  When
``KERNELOPT_GATES_OUT`` is set, the full results go there as JSON
(``scripts/gpu_gates.py`` prints the table from it).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import fast_launch
from kernelopt.contracts.verdicts import GateName, GateSettings, GateStatus
from tests.support.adversarial import (
    SuiteResult,
    cases_for,
    format_table,
    run_suite,
    scratch_dir,
    select_cases,
)

pytestmark = pytest.mark.gpu
GPU_CASES = select_cases(cases_for("cuda"), os.environ.get("KERNELOPT_GATES_CASES"))


def gpu_settings() -> GateSettings:
    bw = os.environ.get("KERNELOPT_GATES_COPY_BW")
    return GateSettings(
        device="cuda",
        # max-autotune compiles take 30-50 s per GEMM problem; the script picks the mode
        baseline_mode=os.environ.get("KERNELOPT_GATES_BASELINE_MODE", "max-autotune-no-cudagraphs"),
        max_rounds=int(os.environ.get("KERNELOPT_GATES_MAX_ROUNDS", "6")),
        # turns for the host clock (GateSettings.host_clock_turns; 0: paired rounds only)
        host_clock_turns=int(
            os.environ.get("KERNELOPT_GATES_HOST_CLOCK_TURNS", GateSettings().host_clock_turns)
        ),
        # turn children's brief preparation (GateSettings.turn_prep_calls; 0: as paired rounds)
        turn_prep_calls=int(
            os.environ.get("KERNELOPT_GATES_TURN_PREP_CALLS", GateSettings().turn_prep_calls)
        ),
        # a later case on a bundle goes straight to turns (GateSettings.reuse_host_probe)
        reuse_host_probe=os.environ.get("KERNELOPT_GATES_REUSE_HOST_PROBE") == "1",
        static_timeout_s=180.0,
        timing_timeout_s=240.0,
        copy_bandwidth_gbs=float(bw) if bw else None,
    )


# a case started before the deadline may still time several rounds (an accepted one ~50 s)
LAST_CASE_S = 90.0


def suite_deadline(config: pytest.Config, started: float) -> float | None:
    """When the suite stops starting work (epoch seconds): the earliest of its own deadline,
    the batch's, and the per-test limit less one case, since pytest-timeout counts this
    module fixture's setup against the first test and a cut fixture loses every verdict."""
    limits = [
        float(os.environ.get(name, "0") or 0)
        for name in ("KERNELOPT_GATES_SUITE_DEADLINE", "KERNELOPT_GATES_DEADLINE")
    ]
    per_test = config.getoption("timeout", default=None)
    if per_test:
        limits.append(started + float(per_test) - LAST_CASE_S)
    return min((limit for limit in limits if limit > 0), default=None)


@pytest.fixture(scope="module")
def gpu_suite(request: pytest.FixtureRequest) -> Iterator[SuiteResult]:
    started = time.time()
    out = os.environ.get("KERNELOPT_GATES_OUT")
    rows_path = Path(out) / "gates_gpu_rows.jsonl" if out else None
    if rows_path is not None:
        rows_path.parent.mkdir(parents=True, exist_ok=True)
        rows_path.write_text("")

    def on_row(row: dict) -> None:  # partial results survive a killed run
        if rows_path is not None:
            with rows_path.open("a") as handle:
                handle.write(json.dumps(row, default=str) + "\n")

    saved = os.environ.get("KERNELOPT_GATES_SMALL")
    os.environ["KERNELOPT_GATES_SMALL"] = "0"  # full sizes, whatever CPU tests set
    workdir = scratch_dir("kernelopt-gates-gpu-")
    try:
        with fast_launch("cuda") as zygote:
            print(f"[gates] {zygote.note} ({zygote.seconds:.1f} s)", flush=True)
            deadline = suite_deadline(request.config, started)
            suite = run_suite(
                gpu_settings(),
                workdir,
                GPU_CASES,
                parallel=6,
                deadline=deadline,
                on_row=on_row,
            )
        suite.phases["zygote"] = float(bool(zygote))
        suite.phases["launch_setup_s"] = round(zygote.seconds, 2)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if saved is None:
            os.environ.pop("KERNELOPT_GATES_SMALL", None)
        else:
            os.environ["KERNELOPT_GATES_SMALL"] = saved
    if out:
        (Path(out) / "gates_gpu.json").write_text(
            json.dumps(suite.to_json(), indent=1, default=str)
        )
        (Path(out) / "gates_gpu_table.txt").write_text(format_table(suite))
    yield suite


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.candidate)
def test_gpu_case_meets_expectation(gpu_suite: SuiteResult, case) -> None:
    outcome = gpu_suite.by_candidate()[case.candidate]
    assert outcome.as_expected, outcome.explain()


def _need(suite: SuiteResult, name: str):
    outcome = suite.by_candidate().get(name)
    if outcome is None:
        pytest.skip(f"{name} not selected (KERNELOPT_GATES_CASES)")
    return outcome.result


def test_at_least_five_honest_candidates_accepted(gpu_suite: SuiteResult) -> None:
    if os.environ.get("KERNELOPT_GATES_CASES"):
        pytest.skip("a subset of cases was selected")
    accepted = [o for o in gpu_suite.outcomes if o.case.cheat == "honest" and o.result.accepted]
    assert len(accepted) >= 5, [o.row() for o in gpu_suite.outcomes if o.case.cheat == "honest"]


def test_structured_matmul_rewrite_is_a_real_30x_or_more(gpu_suite: SuiteResult) -> None:
    """70x by its GPU work; 37-70x by the host clock, as fast as the host runs that day."""
    r = _need(gpu_suite, "diag_rowscale")
    assert r.accepted and r.speedup is not None and r.speedup > 30
    perf = r.verdicts[-1]
    assert perf.status == GateStatus.PASS
    assert perf.metrics["roofline"]["below_floor"] is False
    assert perf.metrics["roofline"]["beats_fp32_flops"] is True


def test_side_stream_is_not_credited_with_a_speedup(gpu_suite: SuiteResult) -> None:
    r = _need(gpu_suite, "side_stream")
    perf = r.verdicts[-1]
    assert not r.accepted and perf.gate == GateName.PERFORMANCE
    if perf.metrics.get("candidate", {}).get("rounds"):
        # (a wrong timed output leaves no candidate rounds: its numbers do not count)
        # the gate's number per call is at least the device-synchronised host timer's,
        # which sees the side stream's work that events on the current stream miss
        cand = perf.metrics["candidate"]
        assert cand["median_ms"] >= cand["host_median_ms"] * 0.999
    if "decision" in perf.metrics:
        assert perf.metrics["decision"]["category"] != "optimized"


def test_illegal_memory_access_is_an_error_verdict(gpu_suite: SuiteResult) -> None:
    v = _need(gpu_suite, "illegal_access").verdicts[0]
    assert v.status == GateStatus.ERROR


def test_rewriting_triton_cache_binaries_rejects_the_candidate(tmp_path: Path) -> None:
    """Run alone (not in the parallel suite): one cache window per candidate process.

    The honest kernel compiles first, so the cache holds a real cubin; the cheat then
    appends a byte to cached binaries in place.
    """
    from gates.cascade import run_gates_1_to_3
    from gates.protocol import ModelSource
    from gates.reference import prepare_reference
    from tests.support.adversarial import CANDIDATES, PROBLEMS

    settings = gpu_settings().model_copy(update={"run_model_gate": False})
    problem = PROBLEMS / "swish_bias.py"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KERNELOPT_GATES_SMALL", "0")
        bundle = prepare_reference(problem, settings, tmp_path / "reference")
        assert bundle.ok

        def check(name: str):
            source = ModelSource(
                kind="candidate", problem_path=str(problem), candidate_path=str(CANDIDATES / name)
            )
            verdicts, _ = run_gates_1_to_3(bundle, source, settings, tmp_path / name)
            return verdicts

        assert all(v.passed for v in check("swish_fused.py"))
        verdicts = check("cache_poison.py")
    assert verdicts[-1].status == GateStatus.FAIL, [v.reason for v in verdicts]
    assert any("compiler cache" in f for f in verdicts[-1].metrics["inputs_tampered"])
