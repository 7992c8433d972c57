"""Campaign entry points on the CPU: single-kernel (forward) candidates and re-stitch failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.campaign import gate_candidate
from kernelopt.contracts import (
    CandidateGateInput,
    CompileResult,
    ProblemSpec,
    SearchMode,
    SearchTarget,
    SegmentResult,
    TargetKind,
)
from kernelopt.contracts.verdicts import GateName, GateSettings, GateStatus
from kernelopt.store import ArtifactStore, open_store
from tests.support.compiled import stub_compiled

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "wrappers"


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(tmp_path / "artifacts")


def _compiled(store: ArtifactStore, problem: Path) -> CompileResult:
    blob = store.put_text("unused in forward mode", name="placeholder")
    source = store.put_text(problem.read_text(), name=problem.name)
    return stub_compiled(ProblemSpec(name=problem.stem, source=source), blob)


def _forward_input(store: ArtifactStore, candidate: str) -> CandidateGateInput:
    compiled = _compiled(store, HERE.parent / "problems" / "gates" / "swish_bias.py")
    target = SearchTarget(id="forward", kind=TargetKind.FORWARD)
    segment = SegmentResult(
        kernels=[], library_calls=[], mode=SearchMode.SINGLE, mode_reason="test", targets=[target]
    )
    source = store.put_text(
        (HERE.parent / "fixtures" / "candidates" / "gates" / f"{candidate}.py").read_text(),
        name="c.py",
    )
    return CandidateGateInput(
        compiled=compiled,
        segment=segment,
        target=target,
        candidate_id=candidate,
        source=source,
        measure_kernel_speedup=False,
        timeout_s=120,
        settings=GateSettings(device="cpu"),
    )


def test_forward_candidate_passes_gates_1_and_2(store: ArtifactStore, cpu_launcher: bool) -> None:
    result = gate_candidate(_forward_input(store, "swish_fused"), store)
    assert [v.gate for v in result.verdicts] == [GateName.STATIC, GateName.CORRECTNESS]
    assert result.passed
    seeds = result.verdicts[1].thresholds["seeds"]
    assert {"seed0", "seed1", "seed2"} <= set(seeds) and "holdout0" in seeds
    # no per-kernel timing on the CPU: the stages that ran say where the time went
    stages = result.stage_seconds
    main = [k for k in stages if "." not in k]
    assert main == ["setup", "reference", "reference_child", "gates_1_2", "cache_guard"]
    assert stages["reference_child"] <= stages["reference"]
    assert all(s >= 0 for s in stages.values())
    # each child's wall time splits into its progress phases plus the time outside them
    ref = {k: v for k, v in stages.items() if k.startswith("ref.")}
    assert "ref.outside" in ref and len(ref) > 1
    assert abs(sum(ref.values()) - stages["reference_child"]) < 0.05
    cand = sum(v for k, v in stages.items() if k.startswith("cand."))
    assert "cand.static_ok" in stages and 0 < cand <= stages["gates_1_2"]
    # the parent's own parts of gates 1-2 add up to it, the child among them
    parts = {k: v for k, v in stages.items() if k.startswith("gates_1_2.")}
    assert [k.split(".")[1] for k in parts] == [
        "lease",
        "arm",
        "child",
        "shared_files",
        "load_outputs",
        "compare",
    ]
    assert abs(sum(parts.values()) - stages["gates_1_2"]) < 0.05
    assert parts["gates_1_2.child"] >= cand - stages["cand.outside"]


def test_forward_cheat_is_a_result_not_an_exception(
    store: ArtifactStore, cpu_launcher: bool
) -> None:
    result = gate_candidate(_forward_input(store, "mutate_input"), store)
    assert not result.passed
    assert result.verdicts[-1].status == GateStatus.FAIL
    assert "in place" in result.verdicts[-1].feedback


def test_candidate_that_does_not_fit_the_wrapper_is_a_static_error(
    store: ArtifactStore, cpu_launcher: bool
) -> None:
    name = "level1_001_relu_chain"
    compiled = CompileResult.model_validate(
        json.loads((FIXTURES / f"{name}.compile.json").read_text())
    )
    wrapper = store.put_text((FIXTURES / f"{name}.py.txt").read_text(), name="wrapper.py")
    problem = store.put_text(
        (HERE.parent / "problems" / "gates" / "swish_bias.py").read_text(), name="p.py"
    )
    compiled = compiled.model_copy(
        update={
            "wrapper": wrapper,
            "problem": compiled.problem.model_copy(update={"source": problem}),
        }
    )
    segment = SegmentResult.model_validate(
        json.loads((FIXTURES / f"{name}.segment.json").read_text())
    )
    kernel = segment.kernels[0].name
    target = SearchTarget(id="k0", kind=TargetKind.KERNEL, kernels=[kernel])
    junk = store.put_text("def something_else():\n    return 1\n", name="junk.py")
    inp = CandidateGateInput(
        compiled=compiled,
        segment=segment,
        target=target,
        candidate_id="junk",
        source=junk,
        settings=GateSettings(device="cpu"),
    )
    result = gate_candidate(inp, store)
    assert len(result.verdicts) == 1
    v = result.verdicts[0]
    assert v.gate == GateName.STATIC and v.status == GateStatus.ERROR
    assert "re-stitched" in v.reason and v.feedback
