"""The compiled baseline as a structured artifact: kernels, library calls, triage."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import ArtifactRef, DeviceTimed, Frozen, reference_to
from .problem import ProblemSpec


class SearchMode(StrEnum):
    AUTO = "auto"
    SINGLE = "single"  # the whole forward is the one search target
    MULTI = "multi"  # library calls frozen, Triton kernels / fusion groups searched


BASELINE_MODE = "max-autotune-no-cudagraphs"


class TensorSpec(Frozen):
    shape: list[int]
    stride: list[int]
    dtype: str
    device: str = "cuda"


class CompileInput(Frozen):
    problem: ProblemSpec
    mode: str = BASELINE_MODE
    measure_default_mode: bool = True
    use_cache: bool = True  # False: recompile even when the content hash is cached


class CompileResult(DeviceTimed):
    """Everything later steps need, by reference; cached by ``cache_key``."""

    problem: ProblemSpec
    cache_key: str
    cache_hit: bool = False
    mode: str
    torch_version: str
    triton_version: str
    gpu_name: str
    numerics: str = ""  # kernelopt.precision.POLICY when compiled ("": not recorded then)
    wrapper: ArtifactRef  # Inductor's generated wrapper module source
    args: ArtifactRef  # the exact flat argument list the compiled graph is called with
    inputs: ArtifactRef  # module inputs drawn from the seed (torch.save)
    init_inputs: ArtifactRef | None = None
    reference_output: ArtifactRef | None = None  # baseline outputs on `args`
    eager_ms: float
    compiled_ms: float
    default_mode_ms: float | None = None
    compile_seconds: float = 0.0
    # the Inductor config patches the compile ran with: the mode's and the product's rules
    inductor_options: dict[str, Any] = Field(default_factory=dict)
    # --- how the flat argument list maps back onto the module (one entry per wrapper arg)
    # "input" | "parameter" | "buffer" | "constant"
    arg_roles: list[str] = Field(default_factory=list)
    arg_names: list[str] = Field(default_factory=list)  # "input:0", "param:fc.weight", ...
    arg_input_index: list[int | None] = Field(default_factory=list)  # module input position
    arg_specs: list[TensorSpec] = Field(default_factory=list)
    num_outputs: int = 0  # the wrapper's outputs, all of them
    # where each of the forward's flat results comes from: ("output", i) or ("input", i) of
    # the wrapper's call, ("item", i) an output as a Python number, ("none", 0) a None,
    # ("constant", i) output_constants[i] (None: every output); and the outputs the forward
    # stores on its module (index -> parameter or buffer name): kernelopt.compile.output_layout
    output_picks: (
        list[tuple[Literal["output", "input", "item", "none", "constant"], int]] | None
    ) = None
    state_outputs: dict[int, str] = Field(default_factory=dict)
    # the Python constants a forward returns as they are, as (kind, text)
    output_constants: list[tuple[Literal["literal", "float", "dtype", "device"], str]] = Field(
        default_factory=list
    )
    mode_reason: str = ""  # why this compile mode is the baseline
    wrapper_ms: float | None = None  # the loaded wrapper's call() on the captured args
    wrapper_matches_compiled: bool | None = None  # wrapper output == torch.compile output, bitwise
    # max |wrapper - torch.compile| on the first call: not always 0, because Inductor autotunes
    # some kernels at their first launch and cuDNN picks algorithms by free workspace; the
    # reloaded wrapper is the baseline, and it is self-consistent (reference_output).
    wrapper_max_abs_diff: float | None = None
    default_mode_wrapper: ArtifactRef | None = None  # reference only; never the baseline
    python_version: str = ""
    # kernel name -> the launch config Inductor's runtime autotuner chose on the baseline's
    # first run ({"kwargs": {...}, "num_warps": n, "num_stages": n}); re-loaded wrappers are
    # pinned to these so the baseline's bits do not depend on autotuning noise
    kernel_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # seconds per step of the compile that made this result (empty on a cache hit): the
    # compile is a campaign's longest single activity (25-50 s on the H200)
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    def forward_inputs(self) -> list[KernelArg]:
        """The forward's user inputs as a signature (parameters are the module's own)."""
        out = []
        for i, role in enumerate(self.arg_roles):
            if role != "input":
                continue
            spec = self.arg_specs[i] if i < len(self.arg_specs) else None
            name = self.arg_names[i] if i < len(self.arg_names) else f"input:{i}"
            out.append(KernelArg(name=name, tensor=spec, expr=name, role="in"))
        return out


class KernelArg(Frozen):
    name: str
    tensor: TensorSpec | None = None
    value: Any = None  # scalars / constexprs as launched
    expr: str = ""  # the argument expression as written in the wrapper (buf0, arg1_1, 1024)
    role: str = ""  # in / out / inout / scalar / grid / workspace (from Inductor's naming)


class KernelLaunch(Frozen):
    """One `.run(...)` launch of a Triton kernel in the wrapper."""

    line: int  # 1-based
    site: str
    function: str = "call"  # wrapper function holding the launch (call, partition_0, ...)
    args: list[KernelArg] = Field(default_factory=list)


class TritonKernel(Frozen):
    name: str
    source: ArtifactRef
    launch_line: int  # 1-based line of the `.run(` launch in the wrapper
    launch_site: str  # the launch statement as written in the wrapper
    args: list[KernelArg] = Field(default_factory=list)
    grid: str = ""
    config: dict[str, Any] = Field(default_factory=dict)  # triton_meta/inductor_meta/configs
    kind: str = ""  # pointwise / reduction / persistent_reduction / template ...
    defined_line: int = 0  # 1-based line of `name = async_compile.triton(...)`
    params: list[str] = Field(default_factory=list)  # the kernel's runtime parameters, in order
    launches: list[KernelLaunch] = Field(default_factory=list)  # every launch, program order


class LibraryCall(Frozen):
    name: str  # e.g. extern_kernels.mm, aten.convolution
    line: int
    statement: str
    needs_triton_replacement: Literal[False] = False
    function: str = "call"


class FusionGroup(Frozen):
    """Adjacent Triton kernels with no library call between them."""

    kernels: list[str]
    lines: list[int] = Field(default_factory=list)  # launch lines the group covers


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
    # exactly what a form-(b) candidate's launch(*args) receives (see compile/contract.py)
    signature: list[KernelArg] = Field(default_factory=list)
    description: str = ""


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
    mode_forced: bool = False  # the user chose the mode
    wrapper_format: str = ""  # e.g. "runner-class" (graph_partition) or "call-function"


class SegmentRef(Frozen):
    """A segmentation by reference: its JSON lives in the artifact store, this travels.

    At a few hundred kernels a ``SegmentResult`` is megabytes; a campaign's state,
    its continue-as-new inputs and every activity input that carried it grew with
    the model.  The workflow decides from these few fields; activities that read
    kernels or launches load the whole segmentation by ``artifact``.
    """

    artifact: ArtifactRef
    mode: SearchMode
    mode_reason: str
    mode_forced: bool = False
    wrapper_format: str = ""
    kernels: int = 0
    library_calls: int = 0
    fusion_groups: int = 0
    targets: int = 0

    @classmethod
    def of(cls, segment: SegmentResult, artifact: ArtifactRef) -> SegmentRef:
        """The reference to ``segment`` once it is stored as ``artifact``."""
        counts = {n: n for n in ("kernels", "library_calls", "fusion_groups", "targets")}
        return reference_to(cls, segment, artifact, counts)


class ScopeRef(Frozen):
    """One target's search scope by reference: what a search carries instead of its segmentation.

    The artifact is a stored ``TargetScope`` (the target, its scoped segmentation and
    its full prompt facts); the activities of a search load it.  At a few hundred
    kernels the whole forward's scope is a megabyte, and it rode in the search's
    input and in every profile, proposal, screening and gate input.  The search
    workflow reads only these fields.
    """

    artifact: ArtifactRef
    target: str  # the target's id
    kernels: int = 0
    library_calls: int = 0
    fusion_groups: int = 0
    kernel_kind: str = ""  # Inductor's kind of the target's first kernel (memory tags)


class SearchStepInput(Frozen):
    """What the input of every step of a kernel search opens with: the problem and the target.

    Profiling, proposing, screening and gating all read the target's scoped
    segmentation; the fields come first in each, in this order, as they always did.
    """

    compiled: CompileResult
    # the scoped segmentation inline, or (searches since "scope-by-reference") its
    # reference: the activity loads it before anything reads ``segment``
    segment: SegmentResult | None = None
    scope: ScopeRef | None = None
    target: SearchTarget


class ScopeSegmentInput(Frozen):
    """One target's part of a stored segmentation (``compile/segment_scope.py``)."""

    segment: SegmentRef
    target: SearchTarget


class SegmentTargetsInput(Frozen):
    """The targets the built-in proposer adds: every kernel alone, and the whole forward.

    ``forward`` is triage's forward target, if it made one: it comes first, as in
    ``rewrite_target``'s ``known`` list.
    """

    compiled: CompileResult
    segment: SegmentRef
    forward: SearchTarget | None = None


class SegmentTargetsResult(Frozen):
    kernels: list[SearchTarget] = Field(default_factory=list)  # program order, share unset
    forward: SearchTarget


class KernelTiming(Frozen):
    name: str
    ms: float  # GPU time per forward, in context (profiler, summed over its launches)
    is_library: bool
    launches: int = 1
    standalone_ms: float | None = None  # Triton kernel alone on its captured args (do_bench)


class TriageInput(Frozen):
    compiled: CompileResult
    # the segmentation, or (campaigns since "segmentation-by-reference") a reference
    # the activity resolves before the GPU child reads ``segment``
    segment: SegmentResult | None = None
    segment_ref: SegmentRef | None = None
    gamma: float = 1.03
    max_required_speedup: float = 10.0  # beyond this Triton speedup: library-dominated
    standalone: bool = True  # also time each Triton kernel alone on its captured args
    # the search cut-off (contracts/target_cutoff.py): targets are searched largest
    # Amdahl share first until those searched cover `coverage` of the Triton time; none
    # below `min_share` of the model's GPU time (an infinite speedup of it gains less)
    coverage: float = Field(default=0.9, gt=0.0, le=1.0)
    min_share: float = Field(default=0.002, ge=0.0, lt=1.0)


class TargetHeadroom(Frozen):
    """A target's bandwidth headroom against the speedup the forward needs of it.

    Triage ranks a target whose headroom is below that speedup after every target
    with headroom (``contracts/data_movement.py``): near its bytes-moved floor, it
    cannot reach gamma alone without moving fewer bytes.  It is not dropped: the
    floor is an approximation (a kernel may read only part of an argument).
    """

    target: str  # the target's id
    ms: float = 0.0  # its GPU time per forward (in context, as ranked)
    floor_bytes: int = 0  # every tensor argument read or written once
    headroom: float | None = None  # ms over the floor at the peak bandwidth; None: unknown
    required: float | None = None  # Amdahl's speedup for gamma; None: unreachable alone
    short: bool = False  # headroom < required: ranked after every target with headroom
    reason: str = ""  # why it is ranked there (short targets only)


class TriageResult(DeviceTimed):
    total_ms: float
    library_ms: float
    triton_ms: float
    library_fraction: float  # f
    ceilings: dict[str, float]  # "2", "5", "10", "inf" -> 1/(f+(1-f)/S)
    required_speedup: float | None  # Triton speedup to reach gamma; None if impossible
    verdict: Literal["worth_searching", "library_dominated"]
    per_kernel: list[KernelTiming] = Field(default_factory=list)
    # by share, desc, except that targets short of bandwidth headroom come after the rest
    targets: list[SearchTarget] = Field(default_factory=list)
    # the targets below the search cut-off (ids, by share), what they hold, and the rule;
    # `targets` then lists only those inside it, which is what the campaign searches
    deferred_targets: list[str] = Field(default_factory=list)
    deferred_share: float = 0.0  # of model GPU time, kernels counted once
    cutoff: str = ""
    gamma: float = 1.03
    verdict_reason: str = ""
    mode: SearchMode = SearchMode.MULTI
    wall_ms: float | None = None  # wrapper call() wall time (do_bench), launch gaps included
    method: str = ""  # how the times were measured
    # the headroom rule: the peak DRAM bandwidth it divides by (None: unknown, rule off),
    # the rule in words, and the numbers of every target it judged (a known floor, a share
    # large enough to reach gamma alone), searched ones first
    bandwidth_gbs: float | None = None
    headroom_rule: str = ""
    headroom: list[TargetHeadroom] = Field(default_factory=list)
    # where the activity's time went (imports, cuda_init, load, wall, profile, standalone)
    stage_seconds: dict[str, float] = Field(default_factory=dict)


class TriageRef(DeviceTimed):
    """Triage by reference: its full result lives in the artifact store, this travels.

    At a few hundred kernels a ``TriageResult`` is hundreds of KB, mostly its
    targets' signatures and the per-kernel table; the campaign sequences on these
    numbers alone, and activities that need a target or a kernel's time load the
    whole result by ``artifact``.  Field names match ``TriageResult``'s where they
    mean the same, so a reader of f, ceilings or the verdict takes either.
    """

    artifact: ArtifactRef
    total_ms: float
    library_ms: float
    triton_ms: float
    library_fraction: float
    ceilings: dict[str, float]
    required_speedup: float | None
    verdict: Literal["worth_searching", "library_dominated"]
    verdict_reason: str = ""
    gamma: float = 1.03
    mode: SearchMode = SearchMode.MULTI
    wall_ms: float | None = None
    cutoff: str = ""
    deferred_share: float = 0.0
    searched: int = 0  # len(targets): the targets inside the cut-off
    deferred: int = 0  # len(deferred_targets)
    timed: int = 0  # len(per_kernel)
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def of(cls, triage: TriageResult, artifact: ArtifactRef) -> TriageRef:
        """The reference to ``triage`` once it is stored as ``artifact``."""
        counts = {"searched": "targets", "deferred": "deferred_targets", "timed": "per_kernel"}
        return reference_to(cls, triage, artifact, counts)


class TargetList(Frozen):
    """The targets a campaign searches, in order: the stored body of a ``TargetPlan``."""

    targets: list[SearchTarget] = Field(default_factory=list)


class TargetPlan(Frozen):
    """A campaign's chosen targets by reference: how many, and where the list is stored."""

    artifact: ArtifactRef
    count: int = 0
    kernel_targets: int = 0  # those that are not the whole forward
    # why the kernels were left out beside the whole forward ("": none were for that)
    kernels_short: str = ""


class PlanTargetsInput(Frozen):
    """What narrows or widens triage's targets into the campaign's search order.

    The workflow decides the flags from its options and proposer; the activity
    reads the stored segmentation and triage (``compile/triage_store.py``).
    """

    compiled: CompileResult
    segment: SegmentRef
    triage: TriageRef
    builtin_kernels: bool = False  # every Triton kernel its own target, ranked by triage
    skip_fusion_groups: bool = False  # the built-in proposer cannot fuse kernels
    max_targets: int | None = None
    rewrites_first: bool = False  # the built-in rewrite family's forward target first


class PlanLookupInput(Frozen):
    """Some of a plan's targets by id (the winners that model verification re-stitches)."""

    plan: TargetPlan
    ids: list[str] = Field(default_factory=list)


class Replacement(Frozen):
    target: SearchTarget
    source: ArtifactRef


class RestitchInput(Frozen):
    compiled: CompileResult
    segment: SegmentResult | None = None  # or ``segment_ref``, as in TriageInput
    segment_ref: SegmentRef | None = None
    replacements: list[Replacement] = Field(default_factory=list)
    run: bool = True  # load the re-stitched wrapper and run it on the captured args
    # store the run's outputs too (tests, diagnostics): a model's output is as large as its
    # input, only the comparison reads it, and a campaign's home must stay small enough to move
    keep_output: bool = False


class RestitchResult(DeviceTimed):
    wrapper: ArtifactRef  # the re-stitched wrapper module
    output: ArtifactRef | None = None  # its outputs on the captured args (``keep_output``)
    bit_exact: bool | None = None  # vs. the baseline output (identity re-stitch check)
    replaced: list[str] = Field(default_factory=list)
    max_abs_diff: float | None = None  # vs. the baseline output
    # target id -> "inductor" | "launch" | "forward"
    forms: dict[str, str] = Field(default_factory=dict)
    stage_seconds: dict[str, float] = Field(default_factory=dict)  # of a run (``run=True``)
