"""The four gates on a standalone Triton problem: ``kernelopt verify`` and the campaign entry points.

CPU children run the kernels under the Triton interpreter (gates 1-3);
gate 4 times the baseline -- the file's own launcher -- against the candidate
in fresh processes exactly as on a GPU, with the host timer only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner import fast_launch
from kernelopt.campaigns import prepare_problem
from kernelopt.cli.verify import verify_command
from kernelopt.contracts import (
    BuiltinProposeInput,
    CompileInput,
    ModelGateInput,
    Replacement,
    RestitchInput,
    SegmentInput,
)
from kernelopt.contracts.verdicts import GateName, GateSettings
from kernelopt.store import open_store
from tests.kernelopt.kinds.conftest import CANDIDATES, PROBLEMS
from tests.support.gating import gate_source

PROBLEM = PROBLEMS / "scale_add.py"


@pytest.fixture(scope="module")
def launcher(kinds_env: Path) -> Iterator[bool]:
    with fast_launch("cpu") as started:
        yield bool(started)


def _verify(capsys, candidate: str, problem: Path = PROBLEM) -> tuple[int, dict]:
    code = verify_command(problem, CANDIDATES / f"{candidate}.py", True, device="cpu")
    return code, json.loads(capsys.readouterr().out)


def test_modelnew_and_launch_only_candidates_are_accepted(capsys, launcher: bool) -> None:
    code, out = _verify(capsys, "scale_add_modelnew")
    assert code == 0 and out["accepted"] is True
    gates = [v["gate"] for v in out["verdicts"]]
    # on the CPU gate 4 runs its checked loop (or says why not) and claims no speed
    assert gates[:3] == ["static", "correctness", "model"] and out["speedup"] is None
    assert gates[3:] in ([], ["performance"])
    seeds = out["verdicts"][1]["thresholds"]["seeds"]
    assert {"seed0", "heldout", "holdout0"} <= set(seeds)
    code, out = _verify(capsys, "scale_add_launch")
    assert code == 0 and out["accepted"] is True
    assert out["candidate"] == str((CANDIDATES / "scale_add_launch.py").resolve())


def test_a_hard_coded_shape_fails_on_held_out_shapes(capsys, launcher: bool) -> None:
    code, out = _verify(capsys, "scale_add_first_shape")
    assert code == 1 and out["deciding_gate"] == "correctness"
    assert "held-out input shape" in out["verdicts"][1]["feedback"]


def test_a_nondeterministic_reference_cannot_run(capsys, launcher: bool) -> None:
    noisy = PROBLEMS / "noisy_reference.py"  # its own launch() is a fitting candidate
    code = verify_command(noisy, noisy, True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    # the kernel kind's own check or the reference child's probe, whichever runs first
    assert code == 2 and "not deterministic" in out["reason"]


def test_campaign_gates_take_a_builtin_variant_end_to_end(kinds_env: Path, launcher: bool) -> None:
    from gates.campaign import gate_model
    from kernelopt.compile.restitch import restitch
    from kernelopt.compile.segment import segment
    from kernelopt.kinds.builtin import propose
    from kernelopt.kinds.registry import compile_on

    store = open_store(kinds_env / "artifacts")
    compiled = compile_on(
        CompileInput(problem=prepare_problem(PROBLEM, store)), store, "cpu", lambda fn: 1.0
    )
    seg = segment(SegmentInput(compiled=compiled), store)
    target = seg.targets[0]
    (variant,) = propose(
        BuiltinProposeInput(
            compiled=compiled, segment=seg, target=target, state_source=target.source, count=1
        ),
        store,
    ).variants
    settings = GateSettings(device="cpu", warmup_ms=1.0, rep_ms=2.0, min_rounds=1, max_rounds=1)
    result = gate_source(
        store, compiled, seg, target, variant.source, "v0", timeout_s=120, settings=settings
    )
    assert result.passed, [v.reason for v in result.verdicts]
    assert result.kernel_ms is not None and result.baseline_kernel_ms is not None
    stages = result.stage_seconds
    main = [k for k in stages if "." not in k]
    assert main[-3:] == ["timing", "timing_children", "cache_guard"]
    assert 0 < stages["timing_children"] <= stages["timing"]
    timing_phases = sum(
        v for k, v in stages.items() if k.split(".")[0] in ("baseline", "candidate")
    )
    assert abs(timing_phases - stages["timing_children"]) < 0.05
    stitched = restitch(
        RestitchInput(
            compiled=compiled,
            segment=seg,
            replacements=[Replacement(target=target, source=variant.source)],
            run=False,
        ),
        store,
    )
    model = gate_model(
        ModelGateInput(compiled=compiled, wrapper=stitched.wrapper, settings=settings), store
    )
    assert [v.gate for v in model.verdicts] == [GateName.MODEL, GateName.PERFORMANCE], [
        v.reason for v in model.verdicts
    ]
    assert model.verdicts[0].passed
    assert model.baseline_ms is not None and model.candidate_ms is not None
    # the model gate says where its time went, as the candidate gate does
    main = [k for k in model.stage_seconds if "." not in k]
    assert main == [
        "reference",
        "reference_child",
        "gates_1_3",
        "timing",
        "timing_children",
        "cache_guard",
    ]
    assert "gates_1_3.child" in model.stage_seconds and "cand.outside" in model.stage_seconds
    # gate 4's baseline against the compile's own timing of it, kept for the audit
    assert compiled.compiled_ms > 0
    drift = model.verdicts[1].metrics["baseline_vs_compile"]
    assert drift == round(model.baseline_ms / compiled.compiled_ms, 3)
    # the baseline beside the re-stitched wrapper is the compile's wrapper (its ModelNew
    # through ForwardRunner); beside a ModelNew it is the baseline's own ModelNew, imported
    # like the candidate, in the search (above) and in the model gate
    assert "baseline.import" not in model.stage_seconds
    assert "baseline.import" in stages
    as_model = gate_model(
        ModelGateInput(
            compiled=compiled, wrapper=variant.source, source_kind="forward", settings=settings
        ),
        store,
    )
    gates = [(v.gate, v.passed) for v in as_model.verdicts]
    assert gates[0] == (GateName.MODEL, True) and gates[1][0] == GateName.PERFORMANCE, gates
    assert "baseline.import" in as_model.stage_seconds and as_model.baseline_ms is not None


def test_gate_4_times_the_files_own_launcher_as_the_baseline(launcher: bool) -> None:
    import torch

    from gates.cascade import verify_candidate
    from gates.jobs.build import build_callable
    from gates.protocol import ModelSource

    fn, info = build_callable(
        ModelSource(kind="compiled", problem_path=str(PROBLEM), compile_mode="max-autotune"),
        "cpu",
        0,
        "",
    )
    assert info["baseline"] == "kernel problem's own launcher"
    x, b = torch.randn(8, 48), torch.randn(48)
    assert torch.equal(fn(x, b), x * 2.0 + b)
    settings = GateSettings(device="cpu", warmup_ms=1.0, rep_ms=2.0, min_rounds=1, max_rounds=1)
    result = verify_candidate(PROBLEM, CANDIDATES / "scale_add_modelnew.py", settings)
    assert [v.gate for v in result.verdicts][-1] == GateName.PERFORMANCE
    assert result.baseline_ms is not None and result.candidate_ms is not None


def test_the_baseline_model_new_is_read_from_its_wrapper_without_running_it() -> None:
    from kernelopt.kinds.compile import WRAPPER, baseline_model_source

    source = 'import os\nos.remove("never")\n"""quoted"""\n'
    text = WRAPPER.format(kind="triton", how="h", source=source, names=[], roles=[], seed=0)
    assert baseline_model_source(text) == source
    with pytest.raises(ValueError, match="CANDIDATE_SOURCE"):
        baseline_model_source("CANDIDATE_SOURCE = make()\n")
