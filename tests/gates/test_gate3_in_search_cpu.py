"""Gate 3 (float64) inside ``gate_candidate``: a small systematic error is caught in the search.

``swish_half_sigmoid`` computes its sigmoid in fp16: about 1e-3 off, inside
gate 2's tolerance, and a thousand times the fp32 reference's own error
against float64.  Without ``model_gate`` it passes; with it, gate 3 decides.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gates.campaign import gate_candidate
from kernelopt.contracts.verdicts import GateName, GateStatus
from kernelopt.store import ArtifactStore, open_store
from tests.gates.test_campaign_cpu import _forward_input


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


def _gate(store: ArtifactStore, candidate: str, model_gate: bool):
    inp = _forward_input(store, candidate).model_copy(update={"model_gate": model_gate})
    return gate_candidate(inp, store)


def test_a_small_systematic_error_passes_gate_2_and_fails_gate_3(
    store: ArtifactStore, cpu_launcher: bool
) -> None:
    without = _gate(store, "swish_half_sigmoid", model_gate=False)
    assert without.passed and without.gates_label == "gates 1-2"
    result = _gate(store, "swish_half_sigmoid", model_gate=True)
    assert [v.gate for v in result.verdicts] == [
        GateName.STATIC,
        GateName.CORRECTNESS,
        GateName.MODEL,
    ]
    assert not result.passed
    v3 = result.verdicts[-1]
    assert v3.status == GateStatus.FAIL and v3.metrics["fp64"] is True
    assert v3.metrics["max_rho"] > v3.thresholds["rho_max"]
    # the feedback explains the rule once, then one line per kind of failure
    lines = v3.feedback.splitlines()
    assert "systematic error" in lines[0] and "fp16/bf16" in lines[0]
    assert all(line.startswith("- call") for line in lines[1:]) and len(lines) >= 2
    failed_sets = {s["set"] for s in v3.metrics["sets"] if not s["ok"]}
    named = {
        n.strip() for line in lines[1:] for n in line.split(":")[0].split(" ", 2)[2].split(",")
    }
    assert named == failed_sets
    assert "gates_1_3" in result.stage_seconds and "gates_1_3.model" in result.stage_seconds


def test_an_honest_kernel_passes_gates_1_to_3_at_a_small_added_cost(
    store: ArtifactStore, cpu_launcher: bool
) -> None:
    _gate(store, "swish_fused", model_gate=False)  # warm: both runs below start alike
    started = time.perf_counter()
    before = _gate(store, "swish_fused", model_gate=False)
    plain = time.perf_counter() - started
    started = time.perf_counter()
    result = _gate(store, "swish_fused", model_gate=True)
    with_gate3 = time.perf_counter() - started
    assert before.passed and result.passed and result.gates_label == "gates 1-3"
    v3 = result.verdicts[-1]
    assert v3.gate == GateName.MODEL and v3.metrics["fp64"] is True
    # gate 3 adds no process: the float64 forward in the reference child and one comparison
    assert with_gate3 < plain + 5.0, (plain, with_gate3)
