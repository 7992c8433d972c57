"""Helion problems on the CPU: pinned configs under the Triton interpreter (skipped without helion)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.kernelopt.kinds.conftest import PROBLEMS, compile_in_child, helion_or_skip

PROBLEM = PROBLEMS / "helion_scale_add.py"


@pytest.fixture(scope="module", autouse=True)
def _needs_helion() -> None:
    helion_or_skip()


@pytest.fixture(scope="module")
def compiled(kinds_env: Path):
    from kernelopt.compile.segment import segment
    from kernelopt.contracts import SegmentInput
    from kernelopt.store import open_store

    result = compile_in_child(PROBLEM, kinds_env)
    store = open_store(kinds_env / "artifacts")
    return result, segment(SegmentInput(compiled=result), store), store


def test_helion_problem_loads_with_the_kernel_as_its_launcher() -> None:
    from kernelopt.kinds.registry import load_problem

    loaded = load_problem(PROBLEM)
    assert loaded.kind == "helion"
    assert loaded.kernel.kernels == ("scale_add",) and loaded.kernel.entry == "scale_add"
    x, b = loaded.make_inputs(0, "cpu")
    assert torch.equal(loaded.make_model(0, "cpu")(x, b), x * 2.0 + b)


def test_on_the_cpu_the_baseline_is_pinned_without_autotuning(compiled) -> None:
    from kernelopt.kinds.builtin import configs_in_wrapper

    result, _, store = compiled
    assert result.mode == "helion-autotuned:none"
    assert "without autotuning" in result.mode_reason
    assert "Helion's default config" in result.mode_reason
    config = configs_in_wrapper(store.get_text(result.wrapper))
    assert set(config) == {"scale_add"} and config["scale_add"]["block_sizes"]
    assert result.wrapper_matches_compiled is True


def test_builtin_variants_of_a_helion_kernel_pass_the_gates(
    compiled, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from gates.runner import fast_launch
    from kernelopt.cli.verify import verify_command
    from kernelopt.contracts import BuiltinProposeInput
    from kernelopt.kinds.builtin import propose

    result, seg, store = compiled
    target = seg.targets[0]
    proposal = propose(
        BuiltinProposeInput(
            compiled=result, segment=seg, target=target, state_source=target.source, count=2
        ),
        store,
    )
    assert len(proposal.variants) == 2 and proposal.kernel_kind == "helion"
    assert all(v.label.startswith("scale_add:block_sizes=") for v in proposal.variants)
    candidate = tmp_path / "variant.py"
    candidate.write_text(store.get_text(proposal.variants[0].source))
    with fast_launch("cpu"):
        code = verify_command(PROBLEM, candidate, True, device="cpu")
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out["reason"]
    assert [v["gate"] for v in out["verdicts"]] == ["static", "correctness", "model"]


def test_autotuning_effort_is_stated_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelopt.errors import ProblemError
    from kernelopt.kinds.helion_kernels import DEFAULT_EFFORT, EFFORT_ENV, effort_for
    from kernelopt.kinds.registry import load_problem

    problem = load_problem(PROBLEM).kernel
    assert effort_for(problem, "cpu") == "none"
    monkeypatch.delenv(EFFORT_ENV, raising=False)
    assert effort_for(problem, "cuda") == DEFAULT_EFFORT
    monkeypatch.setenv(EFFORT_ENV, "full")
    assert effort_for(problem, "cuda") == "full"
    monkeypatch.setenv(EFFORT_ENV, "max")
    with pytest.raises(ProblemError, match="use one of none, quick, full"):
        effort_for(problem, "cuda")


def test_example_helion_problem_loads(kinds_env: Path) -> None:
    from kernelopt.kinds.registry import check_problem_file, load_problem
    from tests.kernelopt.kinds.conftest import ROOT

    path = ROOT / "problems" / "helion" / "001_rmsnorm.py"
    check_problem_file(path)
    problem = load_problem(path).kernel
    assert problem.autotune_effort == "quick" and problem.entry == "rms_norm"
