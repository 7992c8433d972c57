"""The compile step of a kernel problem on the CPU (interpreter): a CompileResult like Inductor's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelopt import contracts
from kernelopt.campaigns import prepare_problem
from kernelopt.contracts.problem import ProblemKind
from kernelopt.errors import ProblemError
from kernelopt.store import ArtifactStore, open_store
from tests.kernelopt.kinds.conftest import CANDIDATES, PROBLEMS


def _timer(calls: list[int]):
    def timer(fn) -> float:
        fn()
        calls.append(1)
        return float(len(calls))

    return timer


@pytest.fixture(scope="module")
def compiled(
    kinds_env: Path,
) -> tuple[contracts.CompileResult, contracts.CompileResult, ArtifactStore, list[int]]:
    from kernelopt.kinds.registry import compile_on

    store = open_store(kinds_env / "artifacts")
    spec = prepare_problem(PROBLEMS / "scale_add.py", store, seed=5)
    calls: list[int] = []
    first = compile_on(contracts.CompileInput(problem=spec), store, "cpu", _timer(calls))
    second = compile_on(contracts.CompileInput(problem=spec), store, "cpu", _timer(calls))
    return first, second, store, calls


def test_the_baseline_is_the_files_own_launcher(compiled) -> None:
    first, second, store, calls = compiled
    assert first.problem.kind == ProblemKind.TRITON
    assert first.mode == "triton-launcher"
    assert "launch() with its defaults" in first.mode_reason and "BLOCK=64" in first.mode_reason
    assert "baseline rho vs float64 = 1 " in first.mode_reason  # same fp32 ops as the reference
    assert first.arg_roles == ["input", "input"] and first.arg_input_index == [0, 1]
    assert [s.shape for s in first.arg_specs] == [[8, 48], [48]]
    assert first.num_outputs == 1 and first.wrapper_matches_compiled is True
    assert (first.eager_ms, first.compiled_ms, first.wrapper_ms) == (1.0, 2.0, 3.0)
    assert second.cache_hit and len(calls) == 3  # the second compile was a cache hit
    from kernelopt.compile.runtime import load_tensors

    x, b = load_tensors(store, first.inputs)
    torch.manual_seed(5)
    assert torch.equal(x, torch.randn(8, 48))  # drawn from the problem's seed
    (out,) = load_tensors(store, first.reference_output)
    assert torch.equal(out, x * 2.0 + b)


def test_segmentation_gives_one_forward_target(compiled) -> None:
    from kernelopt.compile.segment import segment

    first, _, store, _ = compiled
    seg = segment(contracts.SegmentInput(compiled=first), store)
    assert seg.mode == contracts.SearchMode.SINGLE and not seg.kernels and not seg.library_calls
    (target,) = seg.targets
    assert target.kind == contracts.TargetKind.FORWARD and target.source == first.problem.source
    assert [a.tensor.shape for a in target.signature] == [[8, 48], [48]]
    assert seg.mode_reason.startswith("triton kernel problem: the launcher is the one target")
    forced = segment(contracts.SegmentInput(compiled=first, mode=contracts.SearchMode.MULTI), store)
    assert (
        forced.mode == contracts.SearchMode.SINGLE and "no Inductor kernels" in forced.mode_reason
    )


def test_baseline_wrapper_runs_like_the_model_and_restitches(compiled) -> None:
    from kernelopt.compile.restitch import build_restitched
    from kernelopt.compile.runtime import load_wrapper_module, run_call, wrapper_forward
    from kernelopt.compile.segment import segment

    first, _, store, _ = compiled
    x, b = torch.randn(8, 48), torch.randn(48)
    forward = wrapper_forward(first, store, None, "cpu")
    assert torch.equal(forward(x, b)[0], x * 2.0 + b)
    module = load_wrapper_module(store.get_text(first.wrapper), "kinds_baseline")
    assert torch.equal(run_call(module, [x, b])[0], x * 2.0 + b)  # triage calls call(args)
    seg = segment(contracts.SegmentInput(compiled=first), store)
    candidate = store.put_text((CANDIDATES / "scale_add_modelnew.py").read_text())
    text, forms = build_restitched(
        contracts.RestitchInput(
            compiled=first,
            segment=seg,
            replacements=[contracts.Replacement(target=seg.targets[0], source=candidate)],
            run=False,
        ),
        store,
    )
    assert forms == {"forward": "forward"}
    ref = store.put_text(text)
    assert torch.equal(wrapper_forward(first, store, ref, "cpu")(x, b)[0], x * 2.0 + b)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("wrong_kernel", "the file's own kernel does not compute its reference"),
        ("noisy_reference", "reference() is not deterministic"),
    ],
)
def test_bad_problems_stop_at_compile(kinds_env: Path, name: str, reason: str) -> None:
    from kernelopt.kinds.registry import compile_on

    store = open_store(kinds_env / "artifacts")
    spec = prepare_problem(PROBLEMS / f"{name}.py", store)
    with pytest.raises(ProblemError) as info:
        compile_on(contracts.CompileInput(problem=spec, use_cache=False), store, "cpu", _timer([]))
    assert reason in info.value.reason and info.value.path.endswith(f"{name}.py")
