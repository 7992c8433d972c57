"""The search stack on real Inductor kernels: built-in variants, re-stitch, ncu, profiles.

    source scripts/device_env.sh; python3 -m pytest -m gpu tests/e2e/test_gpu_search.py

A small model (a pointwise op fused with a looped row sum, and a persistent softmax)
is compiled with ``benchmark_kernel=True``, so each kernel's source is its own
harness.  The ncu exports land in ``gpu_out`` for use as CPU-test fixtures.

Device time (one H200, ~180-260 s): the module's default-mode compile ~15 s, the
variants ~30 s, three ncu runs of ~30-60 s each (one per test below that profiles:
each checks another path into ncu), and one spawned ``gate_candidate`` ~50 s.  Nothing
here is cheaper without dropping one of those paths; sizes pick the looped and the
persistent reduction, so they stay.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kernelopt.store import ArtifactStore
from tests.e2e.conftest import ROOT
from tests.support.compiled import stub_compiled

pytestmark = pytest.mark.gpu

FIXTURE = "level2_005_conv_gelu_global_mean"
FIXTURE_PROBLEM = ROOT / "problems" / "level2" / "005_conv_gelu_global_mean.py"
TOLERANCE = 1e-3  # another block size reorders a reduction's sum


def _model(x: Any, w: Any, b: Any, z: Any) -> tuple[Any, Any, Any]:
    import torch

    y = torch.relu(x * w + b)  # pointwise, fused with the row sum below
    return y, y.sum(-1), torch.softmax(z, dim=-1)  # looped and persistent reductions


def _inputs() -> tuple[Any, ...]:
    import torch

    torch.manual_seed(0)
    return (
        torch.randn(4096, 4096, device="cuda"),
        torch.randn(4096, device="cuda"),
        torch.randn(4096, device="cuda"),
        torch.randn(8192, 512, device="cuda"),
    )


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(path: Path, name: str) -> tuple[list[Any], float]:
    """Outputs after one call on seeded benchmark arguments, and do_bench's ms."""
    import torch
    from triton.testing import do_bench

    module = _load(path, name)
    torch.manual_seed(0)
    args = module.get_args()
    module.call(args)
    torch.cuda.synchronize()
    outputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    torch.manual_seed(0)
    bench_args = module.get_args()
    return outputs, do_bench(lambda: module.call(bench_args), warmup=25, rep=100)


def _max_diff(got: list[Any], want: list[Any]) -> float:
    import torch

    worst = 0.0
    for a, b in zip(got, want, strict=True):
        if isinstance(a, torch.Tensor) and a.dtype.is_floating_point:
            worst = max(worst, (a.double() - b.double()).abs().max().item())
        elif isinstance(a, torch.Tensor):
            worst = max(worst, float((a != b).sum().item()))
    return worst


def _single_target(store: ArtifactStore, source: str, kernel: str, args: Any = None) -> Any:
    """A compile result, segment and target around one kernel source, for the proposer
    and the profiler (which read only these fields)."""
    from kernelopt.contracts.compiled import (
        KernelLaunch,
        SearchMode,
        SearchTarget,
        SegmentResult,
        TargetKind,
        TritonKernel,
    )
    from kernelopt.contracts.problem import ProblemSpec

    ref = store.put_text(source, name=f"{kernel}.py")
    problem = ProblemSpec(name="gpu_search", source=ref)
    compiled = stub_compiled(
        problem, ref, "", cache_key="gpu-search", torch_version="", triton_version=""
    )
    launches = [KernelLaunch(line=1, site="", args=args)] if args else []
    kernels = [
        TritonKernel(name=kernel, source=ref, launch_line=1, launch_site="", launches=launches)
    ]
    target = SearchTarget(id="k", kind=TargetKind.KERNEL, kernels=[kernel], source=ref)
    segment = SegmentResult(
        kernels=kernels, library_calls=[], mode=SearchMode.MULTI, mode_reason="", targets=[target]
    )
    return compiled, segment, target, ref


@pytest.fixture(scope="module")
def wrapper(gpu_out: Path) -> str:
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code

    inductor_config.benchmark_kernel = True  # kernel sources carry get_args()/call(args)
    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(_model), *_inputs())
    (gpu_out / "search_wrapper.py").write_text(codes[0])
    return codes[0]


def test_builtin_variants_run_correct_and_restitch(
    wrapper: str, gpu_store: ArtifactStore, tmp_path: Path, record: Callable[..., None]
) -> None:
    """Every built-in launch-config variant of each real Inductor kernel computes what the
    kernel computes (to reduction reordering), and the fastest per kernel, stitched back
    into the wrapper, reproduces the model's outputs."""
    from torch._inductor.codecache import PyCodeCache

    from kernelopt.contracts.search import BuiltinProposeInput
    from kernelopt.proposer.builtin import propose
    from kernelopt.proposer.inductor_source import kernels_in_wrapper

    kernels = kernels_in_wrapper(wrapper)
    assert kernels
    best: dict[str, tuple[float, str]] = {}
    for index, (name, source) in enumerate(kernels.items()):
        original = tmp_path / f"{name}.py"
        original.write_text(source)
        want, base_ms = _run(original, f"orig_{index}")
        compiled, segment, target, ref = _single_target(gpu_store, source, name)
        proposal = propose(
            BuiltinProposeInput(
                compiled=compiled, segment=segment, target=target, state_source=ref, count=3
            ),
            gpu_store,
        )
        assert proposal.variants, proposal.note
        for v_index, variant in enumerate(proposal.variants):
            path = tmp_path / f"{name}_v{v_index}.py"
            path.write_text(gpu_store.get_text(variant.source))
            got, ms = _run(path, f"var_{index}_{v_index}")
            error = _max_diff(got, want)
            record(
                "search", kernel=name, label=variant.label, max_err=error, ms=ms, base_ms=base_ms
            )
            assert error <= TOLERANCE, (name, variant.label, error)
            if variant.config and (name not in best or ms < best[name][0]):
                best[name] = (ms, path.read_text())
    stitched = wrapper
    for name, (_, source) in best.items():
        stitched = stitched.replace(kernels[name], source.split("\n", 1)[1], 1)  # drop header
    args = list(_inputs())
    want = _model(*args)
    got = PyCodeCache.load(stitched).call(list(args))
    diffs = [(g - w).abs().max().item() for g, w in zip(got, want, strict=False)]
    assert max(diffs) <= TOLERANCE, diffs


def test_ncu_profile_is_distilled(
    wrapper: str, tmp_path: Path, gpu_out: Path, record: Callable[..., None]
) -> None:
    """ncu profiles a kernel's own benchmark harness in the sandbox, and its exports distil
    into a profile with a positive duration (the exports are kept as CPU fixtures)."""
    from kernelopt.contracts.search import KernelProfile
    from kernelopt.profiling.analyst import classify
    from kernelopt.profiling.distill import distill
    from kernelopt.profiling.ncu import find_ncu, run_ncu
    from kernelopt.proposer.inductor_source import kernels_in_wrapper

    if find_ncu() is None:
        pytest.skip("ncu is not installed on this host")
    name, source = next(iter(kernels_in_wrapper(wrapper).items()))
    harness = tmp_path / f"{name}.py"
    harness.write_text(source)
    run = run_ncu(harness, tmp_path, name, timeout_s=150)
    for suffix, text in (
        ("details.csv", run.details_csv),
        ("details.txt", run.details_text),
        ("raw.csv", run.raw_csv),
    ):
        if text:
            (gpu_out / f"ncu_{suffix}").write_text(text)
    assert run.ok, run.note
    d = distill(run.details_csv, run.details_text, run.raw_csv)
    profile = KernelProfile(
        source="ncu",
        duration_us=d.duration_us,
        sol_compute_pct=d.sol_compute_pct,
        sol_memory_pct=d.sol_memory_pct,
        registers_per_thread=d.registers_per_thread,
        spills=d.spills,
        achieved_occupancy_pct=d.achieved_occupancy_pct,
        top_rules=d.top_rules(3),
    )
    record("search", ncu=profile.model_dump(), analysis=classify(profile).model_dump())
    assert profile.duration_us and profile.duration_us > 0


def test_profile_builds_its_harness_from_a_launch_record(
    wrapper: str, gpu_store: ArtifactStore, tmp_path: Path, record: Callable[..., None]
) -> None:
    """The profile activity's body on a kernel stripped of its harness: it must build one
    from the recorded launch arguments."""
    import torch

    from kernelopt.contracts.compiled import KernelArg, TensorSpec
    from kernelopt.contracts.search import ProfileInput
    from kernelopt.profiling.profile import profile_target
    from kernelopt.proposer.inductor_source import kernels_in_wrapper

    kernels = kernels_in_wrapper(wrapper)
    name = next((k for k in kernels if "red" in k or "per" in k), next(iter(kernels)))
    (tmp_path / f"{name}.py").write_text(kernels[name])
    module = _load(tmp_path / f"{name}.py", "launch_record")
    torch.manual_seed(0)
    args = []
    for i, a in enumerate(module.get_args()):
        if isinstance(a, torch.Tensor):
            dtype = str(a.dtype).replace("torch.", "")
            spec = TensorSpec(shape=list(a.shape), stride=list(a.stride()), dtype=dtype)
            args.append(KernelArg(name=f"arg{i}", tensor=spec))
        else:
            args.append(KernelArg(name=f"arg{i}", value=a))
    bare = kernels[name].split("\n\ndef get_args():")[0] + "\n"
    compiled, segment, target, ref = _single_target(gpu_store, bare, name, args)
    result = profile_target(
        ProfileInput(compiled=compiled, segment=segment, target=target, source=ref, timeout_s=120),
        gpu_store,
    )
    record("search", launch_record_profile=result.model_dump(mode="json"))
    assert result.profile.duration_us and result.profile.duration_us > 0


def test_committed_baseline_profiles_proposes_and_passes_gates_1_2(
    gpu_store: ArtifactStore, record: Callable[..., None]
) -> None:
    """A committed H200 baseline, rehydrated: its reduction kernel is profiled on its
    captured arguments, variants come from Inductor's pinned config, and one of them goes
    through the real gates 1-2."""
    from kernelopt.compile.rehydrate import rehydrate
    from kernelopt.compile.segment import segment
    from kernelopt.contracts.compiled import CompileResult, SegmentInput, TargetKind
    from kernelopt.contracts.search import BuiltinProposeInput, ProfileInput
    from kernelopt.profiling.profile import profile_target
    from kernelopt.proposer.builtin import propose
    from tests.support.gating import gate_source

    fixtures = ROOT / "tests" / "fixtures" / "wrappers"
    recorded = CompileResult.model_validate_json((fixtures / f"{FIXTURE}.compile.json").read_text())
    wrapper = (fixtures / f"{FIXTURE}.py.txt").read_text()
    compiled = rehydrate(recorded, FIXTURE_PROBLEM.read_text(), wrapper, gpu_store)
    seg = segment(SegmentInput(compiled=compiled), gpu_store)
    target = next(
        t
        for t in seg.targets
        if t.kind == TargetKind.KERNEL and t.kernels[0].startswith("triton_red")
    )
    root = profile_target(
        ProfileInput(
            compiled=compiled,
            segment=seg,
            target=target,
            source=target.source,
            state_id="root",
            timeout_s=120,
        ),
        gpu_store,
    )
    assert root.profile.duration_us and root.profile.duration_us > 0
    proposal = propose(
        BuiltinProposeInput(
            compiled=compiled, segment=seg, target=target, state_source=target.source, count=3
        ),
        gpu_store,
    )
    variant = ([v for v in proposal.variants if v.config] or proposal.variants)[0]
    gated = gate_source(
        gpu_store, compiled, seg, target, variant.source, "gpu-search-v0", timeout_s=120
    )
    record(
        "search",
        fixture=FIXTURE,
        label=variant.label,
        verdicts=[(v.gate.value, v.status.value, v.reason[:200]) for v in gated.verdicts],
        kernel_ms=gated.kernel_ms,
        baseline_kernel_ms=gated.baseline_kernel_ms,
    )
    assert gated.passed, [v.reason for v in gated.verdicts]
