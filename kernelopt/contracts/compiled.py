"""The compiled baseline as a structured artifact: kernels, library calls, triage."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import ArtifactRef, Frozen
from .problem import ProblemSpec


class SearchMode(StrEnum):
    AUTO = "auto"
    SINGLE = "single"  # the whole forward is the one search target
    MULTI = "multi"  # library calls frozen, Triton kernels / fusion groups searched


class CompileInput(Frozen):
    problem: ProblemSpec
    mode: str = "max-autotune-no-cudagraphs"
    measure_default_mode: bool = True


class CompileResult(Frozen):
    """Everything later steps need, by reference; cached by ``cache_key``."""

    problem: ProblemSpec
    cache_key: str
    cache_hit: bool = False
    mode: str
    torch_version: str
    triton_version: str
    gpu_name: str
    wrapper: ArtifactRef  # Inductor's generated wrapper module source
    args: ArtifactRef  # the exact flat argument list the compiled graph is called with
    inputs: ArtifactRef  # module inputs drawn from the seed (torch.save)
    init_inputs: ArtifactRef | None = None
    reference_output: ArtifactRef | None = None  # baseline outputs on `args`
    eager_ms: float
    compiled_ms: float
    default_mode_ms: float | None = None
    compile_seconds: float = 0.0


class TensorSpec(Frozen):
    shape: list[int]
    stride: list[int]
    dtype: str
    device: str = "cuda"


class KernelArg(Frozen):
    name: str
    tensor: TensorSpec | None = None
    value: Any = None  # scalars / constexprs as launched


class TritonKernel(Frozen):
    name: str
    source: ArtifactRef
    launch_line: int  # 1-based line of the `.run(` launch in the wrapper
    launch_site: str  # the launch statement as written in the wrapper
    args: list[KernelArg] = Field(default_factory=list)
    grid: str = ""
    config: dict[str, Any] = Field(default_factory=dict)  # triton_meta/inductor_meta/configs
    kind: str = ""  # pointwise / reduction / persistent_reduction / template ...


class LibraryCall(Frozen):
    name: str  # e.g. extern_kernels.mm, aten.convolution
    line: int
    statement: str
    needs_triton_replacement: Literal[False] = False


class FusionGroup(Frozen):
    """Adjacent Triton kernels with no library call between them."""

    kernels: list[str]


class TargetKind(StrEnum):
    KERNEL = "kernel"
    FUSION_GROUP = "fusion_group"
    FORWARD = "forward"


class SearchTarget(Frozen):
    id: str  # deterministic: used in child workflow ids
    kind: TargetKind
    kernels: list[str] = Field(default_factory=list)
    source: ArtifactRef | None = None  # the root state's source (Inductor kernel or forward)
    share: float = 0.0  # fraction of model GPU time (filled by triage)


class SegmentInput(Frozen):
    compiled: CompileResult
    mode: SearchMode = SearchMode.AUTO


class SegmentResult(Frozen):
    kernels: list[TritonKernel]
    library_calls: list[LibraryCall]
    fusion_groups: list[FusionGroup] = Field(default_factory=list)
    mode: SearchMode
    mode_reason: str
    targets: list[SearchTarget]


class KernelTiming(Frozen):
    name: str
    ms: float
    is_library: bool


class TriageInput(Frozen):
    compiled: CompileResult
    segment: SegmentResult
    gamma: float = 1.03


class TriageResult(Frozen):
    total_ms: float
    library_ms: float
    triton_ms: float
    library_fraction: float  # f
    ceilings: dict[str, float]  # "2", "5", "10", "inf" -> 1/(f+(1-f)/S)
    required_speedup: float | None  # Triton speedup to reach gamma; None if impossible
    verdict: Literal["worth_searching", "library_dominated"]
    per_kernel: list[KernelTiming] = Field(default_factory=list)
    targets: list[SearchTarget] = Field(default_factory=list)  # ordered by share, desc


class Replacement(Frozen):
    target: SearchTarget
    source: ArtifactRef


class RestitchInput(Frozen):
    compiled: CompileResult
    segment: SegmentResult
    replacements: list[Replacement] = Field(default_factory=list)


class RestitchResult(Frozen):
    wrapper: ArtifactRef  # the re-stitched wrapper module
    output: ArtifactRef | None = None  # its outputs on the captured args
    bit_exact: bool | None = None  # vs. the baseline output (identity re-stitch check)
    replaced: list[str] = Field(default_factory=list)
