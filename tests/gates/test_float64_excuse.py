"""The compiler's own wrapper of a half-precision chain, which keeps the chain's
intermediates in fp32, through the whole-model gate: fp16 or bf16 units from eager, nearer
the float64 reference, so gate 2 and the timed calls' checks excuse those elements (before
the excuse, three of these four failed gate 2 on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.campaign import gate_candidate, gate_model
from gates.runner import forking_from
from gates.zygote import Zygote
from kernelopt.campaigns import prepare_problem
from kernelopt.contracts import (
    CandidateGateInput,
    CompileInput,
    ModelGateInput,
    ProblemSpec,
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.verdicts import GateName, GateSettings
from kernelopt.kinds.registry import compile_on
from kernelopt.store import open_store
from tests.support.compiled import stub_compiled

IDENTITY = Path(__file__).resolve().parents[1] / "problems" / "identity"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "candidates" / "gates"


@pytest.mark.parametrize(
    "problem",
    [
        pytest.param("fp16_inplace_sine", marks=pytest.mark.slow),  # inputs changed in place
        "fp16_state_sine",  # the state it leaves, where only the scale rule fails
        "fp16_threshold_sine",  # a boolean and integers: equal to the float64 run's
        "fp16_index_ties",  # indices among near-tied scores: a float64 run's alternates
        # topk and sort slots among near ties (unit tests: tests/gates/test_index_ties.py)
        pytest.param("fp16_topk_ties", marks=pytest.mark.slow),
        pytest.param("fp16_order_stats", marks=pytest.mark.slow),  # median and kthvalue
        pytest.param("fp16_bucketize_edges", marks=pytest.mark.slow),  # bins near an edge
        pytest.param("fp16_sine_chain", marks=pytest.mark.slow),
        pytest.param("fp16_exp_overflow", marks=pytest.mark.slow),
        pytest.param("fp16_softmax_temperature", marks=pytest.mark.slow),
        pytest.param("bf16_layernorm_gelu_scaled", marks=pytest.mark.slow),
    ],
)
def test_the_compilers_own_half_precision_chain_passes_with_its_excused_elements_counted(
    cpu_zygote: Zygote | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    monkeypatch.setenv("KERNELOPT_HOME", str(tmp_path))
    store = open_store(tmp_path / "artifacts")
    spec = prepare_problem(IDENTITY / f"{problem}.py", store)
    compiled = compile_on(
        CompileInput(problem=spec, measure_default_mode=False), store, "cpu", lambda fn: 1.0
    )
    with forking_from("cpu", cpu_zygote):
        gated = gate_model(
            ModelGateInput(
                compiled=compiled, wrapper=compiled.wrapper, settings=GateSettings(device="cpu")
            ),
            store,
        )
    verdicts = [(v.gate.value, v.status.value, v.reason[:300]) for v in gated.verdicts]
    assert [v.passed for v in gated.verdicts] == [True, True], verdicts
    assert gated.verdicts[0].metrics["excused_by_float64"] > 0, verdicts
    assert "nearer than it to the float64 reference" in gated.verdicts[0].reason


@pytest.mark.parametrize("model_gate", [False, True], ids=["retime", "search"])
def test_a_forward_candidate_that_keeps_the_chain_in_fp32_is_excused_without_gate_3_too(
    tmp_path: Path, cpu_launcher: bool, model_gate: bool
) -> None:
    """A re-timing runs gates 1-2 only; its reference must still carry the float64 outputs,
    or a winner that passed with excused elements is dropped when it is timed again."""
    store = open_store(tmp_path / "artifacts")
    problem = IDENTITY / "fp16_sine_chain.py"
    source = store.put_text(problem.read_text(), name=problem.name)
    compiled = stub_compiled(
        ProblemSpec(name=problem.stem, source=source), store.put_text("unused", name="w")
    )
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD)
    candidate = FIXTURES / "half_chain_in_fp32.py"
    gated = gate_candidate(
        CandidateGateInput(
            compiled=compiled,
            segment=SegmentResult(
                kernels=[],
                library_calls=[],
                mode=SearchMode.SINGLE,
                mode_reason="test",
                targets=[target],
            ),
            target=target,
            candidate_id="fp32_chain",
            source=store.put_text(candidate.read_text(), name=candidate.name),
            measure_kernel_speedup=False,
            timeout_s=120,
            model_gate=model_gate,
            settings=GateSettings(device="cpu"),
        ),
        store,
    )
    verdicts = [(v.gate.value, v.status.value, v.reason[:300]) for v in gated.verdicts]
    assert gated.passed, verdicts
    correctness = next(v for v in gated.verdicts if v.gate == GateName.CORRECTNESS)
    assert correctness.metrics["excused_by_float64"] > 0, verdicts
