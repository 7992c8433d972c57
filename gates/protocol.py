"""Jobs and results that cross the parent / child boundary of the gate runner.

Each child process gets one job (JSON on disk) and writes one result.  Tensors
travel as ``torch.save`` files in directories the parent chooses; reference
outputs are never in a directory a candidate process is told about (and are
deleted from disk before any candidate runs, see ``gates.cascade``).  A screen job
(the search's untrusted first tier) also streams one line per candidate to a results
file in its workdir, so a child that dies mid-round still leaves what it measured.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelopt.contracts.base import Frozen
from kernelopt.contracts.screening import ScreenParams


class ModelSource(Frozen):
    """How a child builds the callable it runs."""

    kind: Literal["eager", "compiled", "candidate", "wrapper"]
    problem_path: str
    candidate_path: str = ""  # kind == "candidate": file defining ModelNew
    compile_mode: str = ""  # kind == "compiled": torch.compile mode of the baseline
    compiled_json: str = ""  # kind == "wrapper": CompileResult JSON file
    wrapper_json: str = ""  # kind == "wrapper": ArtifactRef JSON ("" = the original wrapper)
    store_root: str = ""  # kind == "wrapper": artifact store root


class InputSet(Frozen):
    """One call's inputs: drawn from a seed, a held-out shape, or new values in old buffers."""

    name: str
    seed: int
    # sealed: drawn like a seed set, for timing's first-sight calls only: its files never
    # enter a candidate process's view before the call (gates.first_sight)
    # widened: a seed set's float values negated and scaled (``WIDEN``), so a kernel that
    # holds only for get_inputs()' range is caught; skipped where the reference cannot run
    # on them or gives non-finite outputs
    kind: Literal["seed", "holdout", "derived", "newvals", "sealed", "widened"] = "seed"
    holdout_index: int = 0
    reuse_buffers_of: str = ""  # newvals: copy the values into that set's input tensors
    # -1: a configured seed set, the same in every verdict; k >= 0: the k-th draw of the
    # unpredictable sets (held-out seed, new values, held-out shapes), which judges one
    # candidate only when a bundle is shared (gates.reference_cache)
    group: int = -1
    # >= 0: the RNG seed of its calls, drawn on its own; -1: derived from name and seed
    # (``call_policy.call_seed``), which the policy file shows, and a CRC gives the seed back
    call_seed: int = -1


def group_name(base: str, group: int) -> str:
    """A set's name in draw ``group``: the first draw keeps the plain name a fresh verdict uses."""
    return base if group <= 0 else f"{base}_h{group}"


class ChildJob(Frozen):
    """What every child is told: where it runs, the seed its model is built under, and the
    directory of the input sets (the reference writes them, candidate and timing read them)."""

    device: str
    model_seed: int = 0
    inputs_dir: str  # candidate processes may read this


class DrawOnly(Frozen):
    """A reference job that adds one draw of unpredictable sets to a kept bundle
    (``gates.reference_cache``): the model is built as before but loaded from the bundle's
    weights, and every set is cut to the bundle's CPU batch, so its outputs fit the rest."""

    draw: int  # the draw's group (its sets' names end in ``_h<draw>``)
    cpu_rows: int = 0  # the batch the bundle's sets were cut to on the CPU (0: none)
    inputs_note: str = ""  # the bundle's own note on that cut, stated again


class ReferenceJob(ChildJob):
    job: Literal["reference"] = "reference"
    problem_path: str
    input_sets: list[InputSet]
    refs_dir: str  # only the parent reads this
    compute_fp64: bool = True
    # gate 2's tolerance, for the near-ties of index outputs in the float64 run
    tie_rtol: float = 1e-3
    tie_atol: float = 1e-3
    count_flops: bool = True
    # add the problem's held-out shapes once per draw of unpredictable sets, from these seeds
    holdout_seeds: list[int] = Field(default_factory=list)
    max_holdout_sets: int = 2
    model_mode: str = "auto"  # GateSettings.model_mode: auto | as_constructed | train | eval
    cpu_budget_s: float = 0.0  # CPU only: shrink the batch when the check would take longer
    draw_only: DrawOnly | None = None  # only this draw's sets, for a kept bundle
    # a draw-only job's weights: the kept bundle's file, read-only; its inputs_dir and
    # refs_dir start empty, so none of the bundle's files is staged into its view and back
    weights_file: str = ""


class SetInfo(Frozen):
    name: str
    input_shapes: list[list[int] | None]
    output_shapes: list[list[int] | None]
    output_dtypes: list[str | None]
    output_devices: list[str | None] = Field(default_factory=list)  # device type per leaf
    output_bytes: int
    input_bytes: int
    mutates_inputs: list[int] = Field(default_factory=list)
    aliased_outputs: list[int] = Field(default_factory=list)  # leaves sharing an input's memory
    # leaves sharing the memory of a tensor the model keeps (a buffer it returns)
    state_outputs: list[int] = Field(default_factory=list)
    derived_holdout: bool = False  # held-out shape made by the checker (another batch size)
    output_structure: str = ""  # gates.problem_io.output_structure of the reference's output


class OutputLeaf(Frozen):
    """What the reference returned for one output leaf: candidates must return the same."""

    shape: list[int] | None  # None: not a tensor (compared by value)
    dtype: str | None
    may_alias: bool = False  # the reference's own output shares an input's memory
    holds_state: bool = False  # ... or the memory of a tensor the model keeps
    device: str = ""  # the reference's device type for this leaf ("": the job's device)
    # its shape depends on the values (nonzero, unique): it differs between the sets a
    # timing child rotates through, so a call is held to its rank, the parent to the set's
    varying: bool = False


class SideEffects(Frozen):
    """What the reference's call changes besides its outputs: the inputs it writes in place
    (by position) and the module entries it updates (by name).  Timing children record
    their values after every call with the outputs, so a timed call is checked on them
    too, and a candidate cannot drop them while timed."""

    inputs: list[int] = Field(default_factory=list)
    state: list[str] = Field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.inputs or self.state)


class EvaluationPolicy(Frozen):
    """How every child evaluates the model (``gates.call_policy``); stated in every outcome."""

    mode: str = "as_constructed"  # as_constructed | train | eval, applied to every side
    training: bool = True  # Model's own top-level flag once the mode is applied
    mode_source: str = "KernelBench convention: the model as constructed"
    random: bool = False  # the forward draws random numbers (differs under another seed)
    seeded: bool = False  # RNGs seeded per input set before every call
    call_seeds: dict[str, int] = Field(default_factory=dict)  # input set -> its call seed
    stateful: list[str] = Field(default_factory=list)  # state entries a call changes
    # two same-seed calls' largest float difference over the output's scale (summation
    # order: atomics), within gates.nondeterminism.JITTER_REL; 0.0: bitwise reproducible
    jitter: float = 0.0
    inputs_note: str = ""  # smaller inputs than get_inputs() gives, and why
    # backend switches the problem file's import sets (label -> repr of the value,
    # gates.timers.switch_values): the problem's own, not a candidate's change
    problem_switches: dict[str, str] = Field(default_factory=dict)

    def summary(self) -> str:
        """One line for verify's output, the environment and the audit."""
        mode = "training" if self.training else "eval"
        parts = [f"{mode} mode ({self.mode_source})"]
        if self.random:
            parts.append(
                "forward draws random numbers: RNGs seeded per input set before every call"
            )
        else:
            parts.append("forward is deterministic (no seeding needed)")
        if self.jitter:
            parts.append(
                f"same-seed calls differ by up to {self.jitter:.2g} of the output's scale "
                "(float summation order, e.g. atomics), far inside the tolerance: accepted"
            )
        if self.stateful:
            shown = ", ".join(self.stateful[:4]) + (" ..." if len(self.stateful) > 4 else "")
            parts.append(f"state restored before every call ({shown})")
        if self.inputs_note:
            parts.append(self.inputs_note)
        return "; ".join(parts)


class ReferenceResult(Frozen):
    sets: list[SetInfo]
    input_sets: list[InputSet] = Field(default_factory=list)  # as run, held-out shapes included
    holdout_available: int = 0  # how many held-out input lists the problem defines
    holdout_note: str = ""  # why no held-out shape was checked, when none was
    widened_note: str = ""  # why the widened set was skipped, when it was
    param_bytes: int = 0
    flops: int | None = None
    state_keys: list[str] = Field(default_factory=list)
    fp64_available: bool = False
    fp64_error: str = ""
    device_name: str = ""
    torch_version: str = ""
    triton_version: str = ""
    policy: EvaluationPolicy = Field(default_factory=EvaluationPolicy)
    call_seconds: float | None = None  # the first reference call, for the CPU estimate
    estimate_note: str = ""  # how long the whole check was estimated to take, when long
    cpu_rows: int = 0  # the batch every set was cut to by the CPU budget (0: full size)


class CandidateJob(ChildJob):
    job: Literal["candidate"] = "candidate"
    model: ModelSource
    input_sets: list[InputSet]
    out_dir: str
    output_nbytes: list[list[int]] = Field(default_factory=list)  # per set, for poisoning
    expected: list[list[OutputLeaf]] = Field(default_factory=list)  # per set
    expected_structures: list[str] = Field(default_factory=list)  # per set ("": unchecked)
    # per set: the inputs the reference changes in place; the child saves the candidate's
    # values of them after the call and the parent compares them as outputs
    reference_mutates: list[list[int]] = Field(default_factory=list)
    poison: bool = True


class CallRecord(Frozen):
    name: str
    seconds: float
    mutated_inputs: list[int] = Field(default_factory=list)
    reused_buffers: bool = False
    output_problem: str = ""  # not a plain, fresh tensor of the reference's shape and dtype


class CandidateResult(Frozen):
    weights: str  # "state_dict" (copied from Model) or "seed" (same seed only)
    weights_note: str = ""
    dry_run_seconds: float = 0.0
    calls: list[CallRecord] = Field(default_factory=list)
    # under Triton's interpreter (the CPU): the candidate's kernels, when none of them ran
    unrun_kernels: list[str] = Field(default_factory=list)


class TimingJob(ChildJob):
    job: Literal["timing"] = "timing"
    # "probe": a turn session's probe child (GateSettings.turn_probe_child), the baseline's
    # job, which builds no model and only answers the idle probe (gates.jobs.turn_side)
    side: Literal["baseline", "candidate", "probe"]
    model: ModelSource
    input_set: str
    # every timed call is checked (gates.checked_calls): the sets its inputs rotate
    # through (same shapes as input_set, each with a reference answer), what the
    # reference returns, and the file the child writes for the parent to compare
    input_sets: list[str] = Field(default_factory=list)
    # the sets ``model`` is timed on once each after its samples, on values it has not seen
    # (first-sight calls: what a memo of inputs cannot answer); never in the rotation, and
    # handed over only when the side asks for them (gates.first_sight); a paired baseline's
    # own in ``baseline_first_sight_sets``
    first_sight_sets: list[str] = Field(default_factory=list)
    baseline_first_sight_sets: list[str] = Field(default_factory=list)
    # where the parent finds the sealed sets' files: in no sandbox's view (the child never
    # reads it; the sets of ``inputs_dir`` are found there)
    sealed_dir: str = ""
    expected: list[OutputLeaf] = Field(default_factory=list)
    # recorded after ``expected``'s leaves, in the same order as ``expected``'s tail
    effects: SideEffects = Field(default_factory=SideEffects)
    checks_file: str = ""  # a file name in the child's own workdir ("" = none written)
    check_samples: int = 128
    min_rep_calls: int = 10
    max_rep_calls: int = 1000
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    host_batch_ms: float = 20.0  # each host-timer batch lasts about this long
    host_batches: int = 3
    # a host batch or turn holds its calls' outputs until its records: at most this many
    # bytes of them, which caps its calls (checked_calls.held_calls)
    held_output_bytes: int = 8 << 30
    # > 0: settling steps (and the events' warm-up after them) last about this much wall
    # time at most (GateSettings.settle_step_wall_ms); 0: sized by GPU time alone
    settle_wall_ms: float = 0.0
    graph_replay: bool = False  # also time the forward replayed from a CUDA graph
    # time this side first, in the same process, before ``model`` is built or imported
    # (gates/README.md "Processes"): one fresh process per round instead of one per side
    baseline: ModelSource | None = None
    # prestarted (gates.prestart): after building the baseline, wait for the parent's go,
    # authenticated by the sha256 of a nonce only the parent knows (gates.go_signal)
    go_digest: str = ""
    go_timeout_s: float = 0.0
    # one side of a turn session (GateSettings.turn_pairs, gates/turns.py): after its events
    # the child times nothing itself; it runs checked turns on the parent's command
    turns: bool = False
    # > 0, a turn side only: prepare without settling, events at most this many calls
    # (GateSettings.turn_prep_calls)
    turn_prep_calls: int = 0


class TimingResult(Frozen):
    side: str
    event_ms: float | None  # median of do_bench samples (None: no CUDA events here)
    event_samples: list[float] = Field(default_factory=list)
    # the calls on ``TimingJob.first_sight_sets``, timed as the event samples are (checked
    # too), each on values this process had not given the side before
    first_sight_samples: list[float] = Field(default_factory=list)
    # host time to issue a call (CUDA): the samples' median and each first-sight call's,
    # recorded for a host-clock memo check on dispatch-bound forwards (not yet decided on)
    dispatch_ms: float | None = None
    first_sight_dispatch_ms: list[float] = Field(default_factory=list)
    host_ms: float  # median of host-timer batches (device-wide sync per batch)
    host_samples: list[float] = Field(default_factory=list)
    host_calls_per_batch: int = 0
    # each host batch's own copies (timed alone just before it and taken off) and its raw
    # time: a reading that moves with the copies is the harness's noise, not the model's
    host_copies_ms: list[float] = Field(default_factory=list)
    host_raw_ms: list[float] = Field(default_factory=list)
    tampered_before: list[str] = Field(default_factory=list)  # replaced after candidate import
    tampered_after: list[str] = Field(default_factory=list)  # replaced during the timed calls
    warm_seconds: float = 0.0  # build + compile + warm-up, excluded from timing
    settle_ms: list[float] = Field(default_factory=list)  # short timings until steady, untimed
    # the forward's kernels alone: one CUDA-graph replay, no Python dispatch or launch cost
    # (None: not asked for, or the forward cannot be captured).  Only ever used against
    # the candidate -- a capture-aware cheat can shrink it, and that only rejects itself.
    graph_ms: float | None = None
    graph_note: str = ""
    checked_calls: int = 0  # calls whose outputs were recorded for the parent's check
    device_name: str = ""
    # placement (gates.placement): the CPU at the start of settling, after the event
    # samples and after the host batches, their NUMA nodes, and the GPU's node
    cpus: list[int | None] = Field(default_factory=list)
    cpu_nodes: list[int | None] = Field(default_factory=list)
    gpu_node: int | None = None
    baseline: TimingResult | None = None  # the side timed first in the same process
    # a turn child's own ms per call of each turn: a diagnostic beside the parent's clock
    turn_ms: list[float] = Field(default_factory=list)


class ScreenEntry(Frozen):
    """One candidate of a screen job: its id and how the child builds it."""

    candidate_id: str
    model: ModelSource


class ScreenJob(Frozen):
    """A round's untrusted screening (``gates.jobs.screen``): one process, many candidates.

    ``candidates`` are those still to screen; the child skips any that already
    have a line in its results file (a fresh child after a crash continues there).
    """

    job: Literal["screen"] = "screen"
    device: str
    seed: int  # the one input the smoke check and the timings use
    model_seed: int
    inputs_dir: str  # the call policy and weights a gate reference would leave (here: none)
    baseline: ModelSource
    candidates: list[ScreenEntry]
    params: ScreenParams


SCREEN_RESULTS = "results.jsonl"  # a screen job's lines, in its workdir


class ScreenLine(BaseModel):
    """One line of a screen job's results file: the baseline's (``candidate_id`` "") or a
    candidate's.  Not frozen and not trusted: candidate code can write this file too."""

    candidate_id: str = ""
    ok: bool = False
    note: str = ""
    ms: float | None = None
    seconds: float = 0.0
    restart: bool = False  # it left the CUDA context unusable: the rest need a fresh child
    suspect: str = ""  # what it left behind that could disturb the candidates after it


class ScreenJobResult(Frozen):
    """How the child ended its run; the estimates themselves are the results file's lines."""

    lines: int  # lines this child wrote
    restart: bool = False  # it stopped after a candidate that lost the CUDA context
