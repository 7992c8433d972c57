"""The adversarial set on the CPU: real Triton kernels under the interpreter.

Every cheat class that can exist without a GPU is rejected by the gate that
should catch it, every broken candidate becomes a verdict, and the honest
candidates pass gates 1-3 (timing on the CPU is meaningless, except for the
timer-patching cheat, which is caught by identity checks, not by numbers).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gates.runner import forking_from
from gates.zygote import Zygote
from kernelopt.contracts.verdicts import GateSettings, GateStatus
from tests.support.adversarial import (
    SuiteResult,
    cases_for,
    cpu_suite_settings,
    format_table,
    run_suite,
)

# A case's child-timeout override exists to end a candidate that never returns (the hang);
# here gate children start in well under a second, so a few seconds end it as surely as
# the suite's 20 s, which the GPU suite keeps.
HANG_TIMEOUT_S = 6.0
CPU_CASES = [
    replace(c, timeout_s=HANG_TIMEOUT_S) if c.timeout_s is not None else c for c in cases_for("cpu")
]


@pytest.fixture(scope="module")
def suite(cpu_zygote: Zygote | None, tmp_path_factory: pytest.TempPathFactory) -> SuiteResult:
    with forking_from("cpu", cpu_zygote):
        result = run_suite(
            cpu_suite_settings(), tmp_path_factory.mktemp("suite"), CPU_CASES, parallel=2
        )
    print("\n" + format_table(result))
    return result


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c.candidate)
def test_case_meets_expectation(suite: SuiteResult, case) -> None:
    outcome = suite.by_candidate()[case.candidate]
    assert outcome.as_expected, outcome.explain()
    if case.expect == "reject":
        failing = next(v for v in outcome.result.verdicts if not v.passed)
        assert failing.feedback, "a rejected candidate must get feedback"
        assert failing.reason


def test_partial_write_is_reported_as_unwritten(suite: SuiteResult) -> None:
    v = suite.by_candidate()["partial_write"].result.verdicts[1]
    first = v.metrics["calls"][0]
    assert first["unwritten"] == first["leaves"][0]["numel"] // 2
    assert "never written" in v.feedback


def test_pointer_cache_is_caught_by_new_values_in_old_buffers(suite: SuiteResult) -> None:
    calls = suite.by_candidate()["pointer_cache"].result.verdicts[1].metrics["calls"]
    newvals = next(c for c in calls if c["set"] == "newvals")
    assert newvals["reused_buffers"] and newvals["stale_output"] and not newvals["ok"]


def test_zeros_pass_allclose_but_fail_the_scale_aware_error(suite: SuiteResult) -> None:
    leaf = suite.by_candidate()["zeros_tiny"].result.verdicts[1].metrics["calls"][0]["leaves"][0]
    assert leaf["mismatched"] == 0  # within rtol = atol = 1e-3 everywhere ...
    assert leaf["scale_err"] == pytest.approx(1.0)  # ... and 100% wrong


def test_bias_passes_gate_2_and_fails_v_model_by_rho(suite: SuiteResult) -> None:
    verdicts = suite.by_candidate()["bias_deep"].result.verdicts
    assert [v.status for v in verdicts[:2]] == [GateStatus.PASS, GateStatus.PASS]
    assert verdicts[2].metrics["max_rho"] > 100


def test_honest_deep_model_has_small_rho(suite: SuiteResult) -> None:
    model = suite.by_candidate()["deep_fused"].result.verdicts[2]
    assert model.passed
    rho = model.metrics["max_rho"]
    assert rho is None or rho < 10


def test_mutation_names_the_input(suite: SuiteResult) -> None:
    calls = suite.by_candidate()["mutate_input"].result.verdicts[1].metrics["calls"]
    assert calls[0]["mutated_inputs"] == [0]


def test_hardcoded_shape_fails_only_on_held_out_shapes(suite: SuiteResult) -> None:
    calls = suite.by_candidate()["hardcoded_shape"].result.verdicts[1].metrics["calls"]
    assert all(c["ok"] for c in calls if c["kind"] != "holdout")
    assert not any(c["ok"] for c in calls if c["kind"] == "holdout")


def test_timer_patching_is_named(suite: SuiteResult) -> None:
    perf = suite.by_candidate()["timer_patch"].result.verdicts[-1]
    assert perf.status == GateStatus.FAIL
    assert "time.perf_counter" in perf.metrics["tampered"]
    assert "triton.testing.do_bench" in perf.metrics["tampered"]


def test_crashes_are_verdicts_with_text(suite: SuiteResult) -> None:
    by = suite.by_candidate()
    seg = by["segfault"].result.verdicts[0]
    assert seg.status == GateStatus.ERROR and "SIGSEGV" in seg.reason
    hang = by["hang"].result.verdicts[0]
    assert hang.status == GateStatus.ERROR and "timed out" in hang.reason
    syn = by["syntax_error"].result.verdicts[0]
    assert "SyntaxError" in syn.reason and "import" in syn.reason
    raised = by["raises"].result.verdicts[0]
    assert "TypeError" in raised.reason and "Traceback" in raised.metrics["traceback"]


def test_every_verdict_records_seeds_and_thresholds(suite: SuiteResult) -> None:
    v = suite.by_candidate()["gelu_erf"].result.verdicts[1]
    seeds = v.thresholds["seeds"]
    assert {"seed0", "seed1", "seed2", "heldout", "newvals", "holdout0"} <= set(seeds)
    assert v.thresholds["rtol"] == 1e-3 and v.thresholds["atol"] == 1e-3


def test_reference_outputs_are_not_left_on_disk(tmp_path: Path, cpu_launcher: bool) -> None:
    from gates.reference import prepare_reference
    from tests.support.adversarial import PROBLEMS

    bundle = prepare_reference(PROBLEMS / "gelu.py", GateSettings(device="cpu"), tmp_path)
    assert bundle.ok and bundle.refs
    leftovers = [p for p in tmp_path.rglob("*.pt") if "refs" in p.parts]
    assert leftovers == []


def test_rewritten_input_files_reject_the_candidate_and_are_restored(
    tmp_path: Path, cpu_launcher: bool, unsandboxed: None
) -> None:
    """Inputs on disk are shared by every later process: a candidate must not change them."""
    from gates.cascade import run_gates_1_to_3
    from gates.problem_io import digest_dir, load_values
    from gates.protocol import ModelSource
    from gates.reference import prepare_reference
    from tests.support.adversarial import CANDIDATES, PROBLEMS

    settings = GateSettings(device="cpu", run_model_gate=False)
    problem = PROBLEMS / "swish_bias.py"
    bundle = prepare_reference(problem, settings, tmp_path / "reference")
    assert bundle.ok
    before = digest_dir(bundle.inputs_dir)

    def check(name: str):
        source = ModelSource(
            kind="candidate", problem_path=str(problem), candidate_path=str(CANDIDATES / name)
        )
        verdicts, _ = run_gates_1_to_3(bundle, source, settings, tmp_path / name)
        return verdicts

    tampered = check("tamper_inputs.py")
    assert [v.gate.value for v in tampered] == ["static", "correctness"]
    assert tampered[-1].status == GateStatus.FAIL
    assert tampered[-1].metrics["inputs_tampered"]
    assert "shared files" in tampered[-1].reason
    assert digest_dir(bundle.inputs_dir) == before  # restored for whoever runs next
    assert any(load_values(p)[0].abs().sum() > 0 for p in bundle.inputs_dir.glob("seed*.pt"))
    # the next candidate sees the real inputs again
    assert all(v.passed for v in check("swish_fused.py"))


def test_candidate_files_are_never_fully_unpickled(tmp_path: Path) -> None:
    """A crafted output file must not run code in the checker when it is read back."""
    import pickle

    from gates.problem_io import load_values

    marker = tmp_path / "owned"

    class Exploit:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "seed0.pt"
    path.write_bytes(pickle.dumps([Exploit()]))
    with pytest.raises(pickle.UnpicklingError):
        load_values(path)
    assert not marker.exists()


def test_a_rewritten_problem_file_is_caught_and_restored(
    tmp_path: Path, cpu_launcher: bool, unsandboxed: None
) -> None:
    """The baseline's timing child imports the problem file: a sleep there would fake a win."""
    import shutil

    from gates.cascade import run_gates_1_to_3
    from gates.protocol import ModelSource
    from gates.reference import prepare_reference
    from tests.support.adversarial import CANDIDATES, PROBLEMS

    problem = tmp_path / "swish_bias.py"
    shutil.copy(PROBLEMS / "swish_bias.py", problem)
    original = problem.read_bytes()
    cheat = tmp_path / "slow_baseline.py"
    cheat.write_text(
        (CANDIDATES / "swish_fused.py").read_text()
        + "\n\nfrom pathlib import Path as _P\n"
        + f"_p = _P({str(problem)!r})\n"
        + "_p.write_text(_p.read_text() + '\\nimport time\\ntime.sleep(0.01)\\n')\n"
    )
    settings = GateSettings(device="cpu", run_model_gate=False)
    bundle = prepare_reference(problem, settings, tmp_path / "reference")
    verdicts, _ = run_gates_1_to_3(
        bundle,
        ModelSource(kind="candidate", problem_path=str(problem), candidate_path=str(cheat)),
        settings,
        tmp_path / "cheat",
    )
    assert verdicts[-1].status == GateStatus.FAIL
    assert verdicts[-1].metrics["inputs_tampered"] == ["swish_bias.py"]
    assert problem.read_bytes() == original


def test_a_rewritten_compiler_cache_file_rejects_the_candidate_and_is_dropped(
    tmp_path: Path, cpu_launcher: bool, unsandboxed: None
) -> None:
    """A baseline loads its kernels from the compiler caches: a candidate must not touch them.

    The cheat appends one byte to a cached binary in place (inode and name unchanged); a
    file it adds (its own compile) is fine.
    """
    from gates.cache_guard import CacheGuard
    from gates.cascade import run_gates_1_to_3
    from gates.protocol import ModelSource
    from gates.reference import prepare_reference
    from tests.support.adversarial import CANDIDATES, PROBLEMS

    cache = tmp_path / "triton-cache"
    (cache / "ab12").mkdir(parents=True)
    victim = cache / "ab12" / "baseline_kernel.cubin"
    victim.write_bytes(b"\x7fELF baseline kernel")
    settings = GateSettings(device="cpu", run_model_gate=False)
    problem = PROBLEMS / "swish_bias.py"
    bundle = prepare_reference(problem, settings, tmp_path / "reference")
    assert bundle.ok
    bundle.caches = CacheGuard([cache])

    def check(name: str, text: str):
        path = tmp_path / name
        path.write_text(text)
        source = ModelSource(kind="candidate", problem_path=str(problem), candidate_path=str(path))
        verdicts, _ = run_gates_1_to_3(bundle, source, settings, tmp_path / path.stem)
        return verdicts

    honest = (CANDIDATES / "swish_fused.py").read_text()
    adds = honest + (
        f"\nfrom pathlib import Path as _P\n_P({str(cache)!r}, 'cd34').mkdir(exist_ok=True)\n"
        f"_P({str(cache)!r}, 'cd34', 'own.cubin').write_bytes(b'mine')\n"
    )
    assert all(v.passed for v in check("adds_own.py", adds))
    poison = honest + (
        f"\nfrom pathlib import Path as _P\n_v = _P({str(victim)!r})\n"
        "_v.write_bytes(_v.read_bytes() + b'\\0')\n"
    )
    verdicts = check("cache_poison.py", poison)
    assert [v.gate.value for v in verdicts] == ["static", "correctness"]
    assert verdicts[-1].status == GateStatus.FAIL
    assert verdicts[-1].metrics["inputs_tampered"] == [
        "compiler cache triton-cache/ab12/baseline_kernel.cubin"
    ]
    assert "compiler caches" in verdicts[-1].feedback
    assert not victim.exists()  # dropped: the cache compiles it again from source
    assert (cache / "cd34" / "own.cubin").exists()  # what candidates compile stays
    # the next candidate is judged on its own: nothing is left armed
    assert all(v.passed for v in check("honest_again.py", honest))


def test_timing_rounds_record_where_they_ran(suite: SuiteResult) -> None:
    """Each round names its CPUs (start of settling, after events, after host batches) and
    times both sides on values new to the process (the memo check's first-sight calls)."""
    import os

    perf = suite.by_candidate()["timer_patch"].result.verdicts[-1]  # the CPU set's timed one
    rounds = perf.metrics["baseline"]["rounds"] + perf.metrics["candidate"]["rounds"]
    assert rounds
    for r in rounds:
        assert len(r["cpus"]) == len(r["cpu_nodes"]) == 3
        # first-sight calls (the baseline on the drawn sets, the candidate on sealed ones)
        assert len(r["first_sight_samples"]) == 2, r
        if os.path.exists("/proc/self/stat"):
            assert all(isinstance(c, int) and c >= 0 for c in r["cpus"]), r["cpus"]


def test_backend_switches_are_named_and_restored(suite: SuiteResult) -> None:
    perf = suite.by_candidate()["backend_flags"].result.verdicts[-1]
    assert perf.status == GateStatus.FAIL, perf.reason
    for switch in (
        "torch.backends.cuda.matmul.allow_tf32",
        "torch.backends.cudnn.allow_tf32",
        "torch.backends.cudnn.benchmark",
        "torch.float32_matmul_precision",
    ):
        assert switch in perf.metrics["tampered"], switch
    assert "changed global backend settings" in perf.reason


def test_an_honest_kernel_passes_the_checks_of_every_timed_call(suite: SuiteResult) -> None:
    """timer_patch's kernel is honest: every call its timing child made checks out.

    This runs the real launch path (the session's sandboxed CPU zygote), so a
    checks file that never reaches the parent would fail here, not in a campaign.
    """
    perf = suite.by_candidate()["timer_patch"].result.verdicts[-1]
    checks = perf.metrics["checked_calls"]
    assert checks and all(c["ok"] for c in checks), checks
    assert all(c["calls"] >= 20 and c["samples"] > 0 and c["whole_outputs"] == 2 for c in checks)


def test_every_cheat_that_behaves_differently_while_timed_is_named_with_its_call(
    suite: SuiteResult,
) -> None:
    for name in ("late_cheat", "stack_sniff", "poison_sniff", "thread_after_return", "job_sniff"):
        perf = suite.by_candidate()[name].result.verdicts[-1]
        assert perf.gate.value == "performance" and perf.status == GateStatus.FAIL, name
        assert "timed call #" in perf.reason, (name, perf.reason)


def test_a_timed_cases_row_keeps_every_round_and_the_stages(suite: SuiteResult) -> None:
    """A median that moves between runs is read from its rounds, a verdict's cost from its
    stages: the rows the GPU suite writes carry both."""
    row = suite.by_candidate()["timer_patch"].row()
    rounds = row["rounds"]
    assert rounds["baseline"] and len(rounds["baseline"]) >= len(rounds["candidate"]) >= 1
    assert all(ms > 0 for ms in rounds["baseline"] + rounds["candidate"])
    assert row["stages"] and all(s >= 0 for s in row["stages"].values())


def test_a_kernel_registered_for_an_aten_op_is_named_as_tampering(suite: SuiteResult) -> None:
    outcome = suite.by_candidate()["library_lazy"]
    failing = next(v for v in outcome.result.verdicts if not v.passed)
    assert failing.gate.value == "performance"
    assert "a kernel the candidate registered for aten::detach (CPU)" in failing.reason
