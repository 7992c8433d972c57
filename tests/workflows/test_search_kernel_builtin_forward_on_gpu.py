"""A CUDA campaign's whole-forward proposals run in the GPU worker (patch builtin-forward-on-gpu).

Inductor regeneration compiles and autotunes on the GPU; in the CPU worker of a GPU host
that work would overlap a gate's timing. Kernel targets keep the CPU queue.
"""

from __future__ import annotations

import uuid

from temporalio import activity

from kernelopt.contracts import names
from kernelopt.contracts.compiled import SearchTarget, TargetKind
from kernelopt.contracts.search import BuiltinProposeInput, BuiltinProposeResult, SearchParams
from kernelopt.contracts.verdicts import GateSettings
from tests.workflows.test_search_kernel import Gpu, run_search, search_input


class GpuWithProposer(Gpu):
    """The GPU doubles plus a recorder for the GPU-queue proposer."""

    def __init__(self) -> None:
        super().__init__()
        self.proposed: list[str] = []

    def propose_on_gpu_activity(self):
        @activity.defn(name=names.PROPOSE_BUILTIN_GPU)
        async def propose_on_gpu(inp: BuiltinProposeInput) -> BuiltinProposeResult:
            self.proposed.append(inp.target.id)
            return BuiltinProposeResult(variants=[], note="proposed in the GPU worker")

        return propose_on_gpu


async def _search(env, store, kind: TargetKind) -> tuple[GpuWithProposer, object]:
    gpu = GpuWithProposer()
    inp = search_input(
        store, f"fwd-gpu-{uuid.uuid4().hex[:6]}", params=SearchParams(iterations=1), use_llm=False
    )
    target = SearchTarget(
        id=f"{kind.value}-t", kind=kind, kernels=inp.target.kernels, source=inp.target.source
    )
    inp = inp.model_copy(update={"target": target, "gates": GateSettings(device="cuda")})
    result, _ = await run_search(env, inp, gpu)
    return gpu, result


async def test_a_cuda_forward_target_is_proposed_in_the_gpu_worker(env, store):
    gpu, result = await _search(env, store, TargetKind.FORWARD)
    assert gpu.proposed == ["forward-t"]
    assert "proposed in the GPU worker" in result.stopped_reason


async def test_a_cuda_kernel_target_keeps_the_cpu_proposer(env, store):
    gpu, result = await _search(env, store, TargetKind.KERNEL)
    assert gpu.proposed == []
    assert result.candidates_tried > 0  # the CPU worker's real proposer tuned its launch
